import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { embeddingWords, hashedEmbedding } from '../../src/models/echo-embedding.js';

export interface EmbeddingRequest {
  model: string;
  input: string[];
  authorization: string | undefined;
}

export interface FakeEmbeddings {
  /** `http://127.0.0.1:PORT/v1`, the baseURL a provider points at. */
  baseURL: string;
  requests: EmbeddingRequest[];
  /** `ok` answers vectors; `fail` answers 500; `stall` never answers (a slow provider). */
  mode: 'ok' | 'fail' | 'stall';
  /** Texts embedded so far (all requests that were answered). */
  embeddedTexts(): number;
  close(): Promise<void>;
}

/**
 * A real OpenAI-compatible `POST /v1/embeddings` server for tests and benchmarks. Its vectors
 * are deterministic (feature-hashed words and word pieces, normalized: the development model's
 * function), `dimensions` long, or longer per model name (`…-512`), so changing the model
 * changes the vectors. Usage counts one token per word.
 */
export async function startFakeEmbeddings(options: { dimensions?: number } = {}): Promise<FakeEmbeddings> {
  const stalled = new Set<ServerResponse>();
  let answered = 0;
  const fake: FakeEmbeddings = {
    baseURL: '',
    requests: [],
    mode: 'ok',
    embeddedTexts: () => answered,
    close: async () => {
      for (const res of stalled) res.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const handle = (req: IncomingMessage, res: ServerResponse, raw: string) => {
    if (req.method !== 'POST' || !req.url?.endsWith('/embeddings')) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'not found', type: 'invalid_request_error' } }));
      return;
    }
    const body = JSON.parse(raw) as { model: string; input: string | string[] };
    const input = Array.isArray(body.input) ? body.input : [body.input];
    fake.requests.push({ model: body.model, input, authorization: req.headers.authorization });
    if (fake.mode === 'stall') {
      stalled.add(res);
      return;
    }
    if (fake.mode === 'fail') {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'embedding backend down', type: 'server_error' } }));
      return;
    }
    const dimensions = Number(/-(\d+)$/.exec(body.model)?.[1] ?? options.dimensions ?? 256);
    answered += input.length;
    const tokens = input.reduce((sum, text) => sum + embeddingWords(text).length, 0);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        object: 'list',
        model: body.model,
        data: input.map((text, index) => ({
          object: 'embedding',
          index,
          embedding: hashedEmbedding(text, dimensions),
        })),
        usage: { prompt_tokens: tokens, total_tokens: tokens },
      }),
    );
  };
  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (part: Buffer) => parts.push(part));
    req.on('end', () => handle(req, res, Buffer.concat(parts).toString('utf8')));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  fake.baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return fake;
}
