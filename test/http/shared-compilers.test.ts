import { describe, expect, it, vi } from 'vitest';

/** Every response schema fast-json-stringify is asked to compile while an app is built. */
const compiles = vi.hoisted((): unknown[] => []);
vi.mock('@fastify/fast-json-stringify-compiler', async (importOriginal) => {
  const real = await importOriginal<typeof import('@fastify/fast-json-stringify-compiler')>();
  return {
    ...real,
    SerializerSelector: () => {
      const build = real.SerializerSelector();
      return (external: unknown, options: object) => {
        const compile = build(external, options);
        return (route: Parameters<typeof compile>[0]) => {
          compiles.push(route.schema);
          return compile(route);
        };
      };
    },
  };
});
import { compiledOnce, sharedSerializerBuilder } from '../../src/http/shared-compilers.js';

describe('schemas compiled once', () => {
  it('compiles each distinct schema once, whatever object carries it', () => {
    const compiled: unknown[] = [];
    const compile = compiledOnce((schema) => {
      compiled.push(schema);
      return compiled.length;
    });
    expect(compile({ type: 'string' })).toBe(1);
    expect(compile({ type: 'string' })).toBe(1);
    expect(compile({ type: 'number' })).toBe(2);
    expect(compiled).toEqual([{ type: 'string' }, { type: 'number' }]);
  });

  it('shares a serializer only between scopes with the same shared schemas', () => {
    const build = sharedSerializerBuilder();
    const shared = { Name: { $id: 'Name', type: 'object', properties: { name: { type: 'string' } } } };
    const other = { Name: { $id: 'Name', type: 'object', properties: { title: { type: 'string' } } } };
    const route = (schema: unknown) => ({ schema, method: 'GET', url: '/', httpStatus: '200' });
    const schema = { $ref: 'Name#' };
    const first = build(shared, {})(route(schema));
    expect(build(shared, {})(route({ $ref: 'Name#' }))).toBe(first);
    const second = build(other, {})(route(schema));
    expect(second).not.toBe(first);
    expect(first({ name: 'a', title: 'b' })).toBe('{"name":"a"}');
    expect(second({ name: 'a', title: 'b' })).toBe('{"title":"b"}');
  });

  it('builds the app compiling each distinct response schema once', async () => {
    let declared = 0;
    compiles.length = 0;
    // Test files share a process (vitest.config.ts): the app is loaded afresh, so that it sees
    // the counting compiler above rather than modules another file loaded before.
    vi.resetModules();
    const { createTestApp } = await import('../helpers/app.js');
    const t = await createTestApp({
      beforeRoutes: (app) => {
        app.addHook('onRoute', (route) => {
          for (const schema of Object.values((route.schema?.response ?? {}) as Record<string, unknown>)) {
            if (schema) declared++;
          }
        });
      },
    });
    try {
      // Hundreds declared (every route its error bodies), each distinct one compiled once.
      const distinct = new Set(compiles.map((schema) => JSON.stringify(schema)));
      expect(distinct.size).toBeGreaterThan(10);
      expect(compiles.length).toBe(distinct.size);
      expect(declared).toBeGreaterThan(5 * distinct.size);
      // Routes declaring the same error body answer it through the one function compiled for it.
      const a = await t.app.inject({ method: 'GET', url: '/v1/projects' });
      const b = await t.app.inject({ method: 'GET', url: '/v1/chats' });
      expect(a.statusCode).toBe(401);
      expect(b.json()).toEqual(a.json());
    } finally {
      await t.close();
    }
  });
});
