import { Type } from 'typebox';
import { envelope } from './common.js';

export const KnowledgeParams = Type.Object({ projectId: Type.String({ maxLength: 200 }) });

const count = Type.Integer({ minimum: 0 });

export const IndexSummaryResponse = envelope(
  Type.Object({
    files: Type.Object(
      { pending: count, indexing: count, indexed: count, failed: count, unsupported: count },
      { description: 'Files of the project by index status' },
    ),
    chunks: Type.Integer({ minimum: 0, description: 'Searchable chunks of the project' }),
    embeddingModel: Type.Union([Type.String(), Type.Null()], {
      description: "The workspace's embedding model, or null: lexical search only",
    }),
    vectors: Type.Union(
      [Type.Literal('ready'), Type.Literal('building'), Type.Literal('off'), Type.Literal('unavailable')],
      {
        description:
          '`off`: no embedding model; `building`: chunks still lack vectors; `ready`; `unavailable`: the database cannot search vectors',
      },
    ),
    vectorsError: Type.Union([Type.String(), Type.Null()], {
      description:
        'Why vectors are not `ready`: the last embedding error (retried with backoff) or why the database cannot search vectors; null otherwise',
    }),
  }),
  'The index summary',
);

export const RebuildResponse = envelope(
  Type.Object({
    files: Type.Integer({ minimum: 0, description: 'Files marked for indexing again' }),
  }),
  'Indexing again has started',
);

/** Results a search answers when the query names no `limit`. */
export const SEARCH_LIMIT_DEFAULT = 10;

export const SearchQuery = Type.Object({
  q: Type.String({ minLength: 1, maxLength: 1000, description: 'What to look for, 1–1,000 characters' }),
  // Optional: a client may leave it out (the document once marked it required).
  limit: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: 50,
      default: SEARCH_LIMIT_DEFAULT,
      description: `Results at most, 1–50, default ${SEARCH_LIMIT_DEFAULT}`,
    }),
  ),
});

export const SearchResponse = envelope(
  Type.Object({
    results: Type.Array(
      Type.Object({
        fileId: Type.String(),
        path: Type.String(),
        name: Type.String(),
        text: Type.String({ description: 'The matching chunk of the file' }),
        score: Type.Number({ description: 'Relevance; higher is better, comparable within one search' }),
        heading: Type.Union([Type.String(), Type.Null()], {
          description: 'Heading path of the chunk, e.g. `Install › Linux`, or sheet and rows',
        }),
        pages: Type.Union([Type.Array(Type.Integer()), Type.Null()], {
          description: 'PDF pages the chunk comes from',
        }),
      }),
      { description: 'Best first; at most 3 chunks of one file' },
    ),
  }),
  'The matching chunks',
);
