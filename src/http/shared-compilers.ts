import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';

/**
 * Compiles each distinct schema once. Fastify compiles a serializer for every response schema
 * of every route and a validator for every request part: about 750 serializers of 72 distinct
 * schemas here (every route declares the same error bodies), and 120 validators of 35.
 * Compiling the duplicates took about a second of each start on a slow host (a third of it),
 * and of every app a test builds. A compiled function depends only on its schema and on the
 * compiler's options and shared schemas, which are fixed per cache.
 */
export function compiledOnce<Compiled>(
  compile: (schema: unknown) => Compiled,
): (schema: unknown) => Compiled {
  const compiled = new Map<string, Compiled>();
  return (schema) => {
    const key = JSON.stringify(schema);
    let found = compiled.get(key);
    if (found === undefined) {
      found = compile(schema);
      compiled.set(key, found);
    }
    return found;
  };
}

/**
 * Fastify's own serializer builder (fast-json-stringify), with each distinct response schema
 * compiled once per set of shared schemas: Fastify builds a compiler for every plugin scope
 * that adds schemas (five here, all with the same shared schemas).
 */
export function sharedSerializerBuilder(): ReturnType<typeof SerializerSelector> {
  const buildDefault = SerializerSelector();
  const bySharedSchemas = new Map<string, (schema: unknown) => Serializer>();
  return (externalSchemas, options) => {
    const key = JSON.stringify([externalSchemas, options]);
    let once = bySharedSchemas.get(key);
    if (!once) {
      const compile = buildDefault(externalSchemas, options);
      // The default compiler reads only the schema of the route definition it is given.
      once = compiledOnce((schema) => compile({ schema, method: '', url: '', httpStatus: '' }));
      bySharedSchemas.set(key, once);
    }
    return (route) => once(route.schema);
  };
}

type Serializer = (value: unknown) => string;
