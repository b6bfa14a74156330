import type {
  KyselyPlugin,
  PluginTransformQueryArgs,
  PluginTransformResultArgs,
  QueryResult,
  RootOperationNode,
  UnknownRow,
} from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KnowledgeVectors } from '../../src/knowledge/vectors.js';
import { ModelRegistry } from '../../src/models/registry.js';
import { createTestEnv, engineName, type TestEnv } from '../helpers/app.js';

/** A database connection that fails every query while `failing` is set, as one that went away. */
class FailingQueries implements KyselyPlugin {
  failing = false;

  transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
    if (this.failing) {
      throw Object.assign(new Error('connect ECONNREFUSED 10.20.30.40:5432'), { code: 'ECONNREFUSED' });
    }
    return args.node;
  }

  transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return Promise.resolve(args.result);
  }
}

describe(`whether the database can search vectors (${engineName})`, () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await createTestEnv();
  });
  afterAll(async () => {
    await env?.close();
  });

  it('checks again after a database that failed the check, and says so without its error', async () => {
    const registry = new ModelRegistry(env.config);
    const expected = await new KnowledgeVectors(env.database.db, registry).support();
    const connection = new FailingQueries();
    const vectors = new KnowledgeVectors(env.database.db.withPlugin(connection), registry);
    connection.failing = true;
    const failed = await vectors.support();
    expect(failed).toEqual({
      available: false,
      reason: 'the database failed the check for vector support; it is checked again',
    });
    // A failure of the database says nothing of the extension: not remembered for the process.
    connection.failing = false;
    expect(await vectors.support()).toEqual(expected);
  });
});
