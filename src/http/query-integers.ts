import type { ErrorObject, ValidateFunction } from 'ajv';

/** What AJV's validators take after the data (not exported by name). */
type DataContext = Parameters<ValidateFunction>[1];

/** An integer as a query string writes one: `20`, `-1`, `007`. */
const WRITTEN_INTEGER = /^-?[0-9]+$/;

function integerProperties(schema: unknown): string[] {
  const properties = (schema as { properties?: Record<string, { type?: unknown }> } | null)?.properties;
  return Object.entries(properties ?? {}).flatMap(([name, property]) =>
    property?.type === 'integer' ? [name] : [],
  );
}

/** The error AJV gives `limit=abc`, so a blank `limit` is answered alike. */
function notAnInteger(name: string, value: string, schema: unknown): ErrorObject {
  const property = (schema as { properties: Record<string, unknown> }).properties[name];
  return {
    instancePath: `/${name}`,
    schemaPath: `#/properties/${name}/type`,
    keyword: 'type',
    params: { type: 'integer' },
    message: 'must be integer',
    schema: 'integer',
    parentSchema: property as ErrorObject['parentSchema'],
    data: value,
  };
}

/**
 * `validate` for a query string schema, refusing an integer parameter whose value is not written
 * as an integer. Query values arrive as text, and AJV's coercion reads them with `Number()`: a
 * blank `limit=%20` became 0 and was answered "must be >= 1" (as if 0 had been sent), a blank
 * `offset` became 0 and was taken, and `1e1`, `0x10`, ` 1` or `1.0` were numbers. They are now
 * the 400 "must be integer" that `limit=abc` gets. A repeated parameter (an array) is left to AJV.
 */
export function strictQueryIntegers(schema: unknown, validate: ValidateFunction): ValidateFunction {
  const names = integerProperties(schema);
  if (names.length === 0) return validate;
  const checked = ((data: unknown, context?: DataContext) => {
    const query = (data ?? {}) as Record<string, unknown>;
    for (const name of names) {
      const value = query[name];
      if (typeof value === 'string' && !WRITTEN_INTEGER.test(value)) {
        checked.errors = [notAnInteger(name, value, schema)];
        return false;
      }
    }
    const valid = validate(data, context);
    checked.errors = validate.errors;
    return valid;
  }) as ValidateFunction;
  // Fastify passes AJV's context (what lets coercion write into the query) when this is set.
  checked.schemaEnv = validate.schemaEnv;
  checked.schema = validate.schema;
  return checked;
}
