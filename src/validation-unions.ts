import { isDeepStrictEqual } from 'node:util';
import type { ErrorObject } from 'ajv';

/**
 * What explaining a union needs of an AJV error: the API's (Fastify's validation errors) and the
 * setup file's (AJV's own) both have it. `schema`, `parentSchema` and `data` come with AJV's
 * `verbose` option, which both validators set (app.ts, setup/validate.ts): without them a fixed
 * value stopped at its type, and a union of objects, are explained as AJV reports them.
 */
export type SchemaIssue = Pick<
  ErrorObject,
  'instancePath' | 'schemaPath' | 'keyword' | 'params' | 'message' | 'schema' | 'parentSchema' | 'data'
>;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The values a schema of fixed values takes (`const`, `enum`), or undefined for any other schema. */
function fixedValues(schema: unknown): unknown[] | undefined {
  if (!isObject(schema)) return undefined;
  if ('const' in schema) return [schema.const];
  return Array.isArray(schema.enum) ? schema.enum : undefined;
}

/** The params of a union explainUnion has explained: the shapes its value may have. */
type ShapesParams = { shapes?: string[] };

/**
 * A failed `type`, `const` or `enum`, or an explained union of such: the value does not have that
 * shape at all.
 */
export function isWrongShape(issue: SchemaIssue): boolean {
  return (
    ['type', 'const', 'enum'].includes(issue.keyword) || (issue.params as ShapesParams).shapes !== undefined
  );
}

function isShapeMismatch(issue: SchemaIssue, path: string): boolean {
  return issue.instancePath === path && isWrongShape(issue);
}

/** The shapes a mismatch names: `string`, `"auto"`. */
function shapesOf(issue: SchemaIssue): string[] {
  const params = issue.params as ShapesParams & {
    type?: string | string[];
    allowedValue?: unknown;
    allowedValues?: unknown[];
  };
  if (params.shapes) return params.shapes;
  if (issue.keyword === 'type') return [params.type ?? []].flat().map(String);
  if (issue.keyword === 'const') return [JSON.stringify(params.allowedValue)];
  return (params.allowedValues ?? []).map((value) => JSON.stringify(value));
}

/**
 * The shapes one branch of a union takes. A literal (`{type: "string", const: "auto"}`) fails
 * both for a number: its value says more than its type, which every literal repeats.
 */
function branchShapes(mismatches: SchemaIssue[]): string[] {
  const values = mismatches.filter((issue) => issue.keyword !== 'type');
  return (values.length > 0 ? values : mismatches).flatMap(shapesOf);
}

function listed(items: string[]): string {
  return items.length < 2 ? items.join('') : `${items.slice(0, -1).join(', ')} or ${items.at(-1)}`;
}

/** A union that fails because its value fits none of its branches (a `oneOf` may fit two). */
function isFailedUnion(issue: SchemaIssue): boolean {
  if (issue.keyword === 'anyOf') return true;
  return issue.keyword === 'oneOf' && (issue.params as { passingSchemas?: unknown }).passingSchemas == null;
}

/**
 * AJV reports a value that fits none of a union's shapes as each branch's failures, then the
 * union's own: for a field that `null` may clear (in a PATCH or the setup file) that is the real
 * problem, "must be null" and "must match a schema in anyOf"; for fixed choices (a member's
 * `role`), "must be equal to constant" once per choice. The union's issues become either those of
 * the branch whose shape the value has (its type matched, something inside did not), or, when it
 * has none of them, one issue listing every shape it may have ("must be string, array or null").
 */
function explainUnion<T extends SchemaIssue>(union: T, inside: T[]): T[] {
  const branches = new Map<string, T[]>();
  for (const issue of inside) {
    const branch = issue.schemaPath.slice(union.schemaPath.length + 1).split('/')[0]!;
    const issues = branches.get(branch);
    if (issues) issues.push(issue);
    else branches.set(branch, [issue]);
  }
  const chosen = explainByDiscriminator(union, branches);
  if (chosen) return chosen;
  const mismatches = (branch: T[]) => branch.filter((issue) => isShapeMismatch(issue, union.instancePath));
  const fitting = [...branches.values()].find((branch) => mismatches(branch).length === 0);
  if (fitting) return fitting;
  const shapes = [...new Set([...branches.values()].flatMap((branch) => branchShapes(mismatches(branch))))];
  return [{ ...union, params: { shapes }, message: `must be ${listed(shapes)}` }];
}

/** `a/b` → `a~1b`: a name as a segment of a JSON pointer, such as AJV's instancePath. */
function pointerSegment(name: string): string {
  return name.replaceAll('~', '~0').replaceAll('/', '~1');
}

/**
 * An object sent for a union of objects told apart by a field of fixed values (`tool_choice`'s
 * `{type: "function", function}` beside its strings) is explained by that field: the branch it
 * selects, whose problem is the value's; a missing field as required; any other value of it as
 * the values it may take, `type must be "function"`. Without this the first branch of the
 * value's type spoke for it: `{type: "fn"}` was told "function is required", a problem of a
 * branch it never chose. The field is the first that every object branch fixes. Needs AJV's
 * `verbose` issues (the union's value and its branches); undefined when the union is not of
 * that kind.
 */
function explainByDiscriminator<T extends SchemaIssue>(
  union: T,
  branches: Map<string, T[]>,
): T[] | undefined {
  const value: unknown = union.data;
  if (!isObject(value) || !Array.isArray(union.schema)) return undefined;
  const objects = (union.schema as unknown[]).flatMap((schema, index) =>
    isObject(schema) && schema.type === 'object' && isObject(schema.properties)
      ? [{ index, properties: schema.properties, required: [schema.required ?? []].flat() }]
      : [],
  );
  const first = objects[0];
  if (!first) return undefined;
  const field = Object.keys(first.properties).find((name) =>
    objects.every(({ properties }) => fixedValues(properties[name]) !== undefined),
  );
  if (field === undefined) return undefined;
  if (value[field] === undefined) {
    if (!objects.every(({ required }) => required.includes(field))) return undefined;
    const missing = { missingProperty: field };
    return [
      { ...union, keyword: 'required', params: missing, message: `must have required property '${field}'` },
    ];
  }
  const valuesOf = (properties: Record<string, unknown>) => fixedValues(properties[field]) ?? [];
  const selected = objects.find(({ properties }) =>
    valuesOf(properties).some((fixed) => isDeepStrictEqual(fixed, value[field])),
  );
  if (selected) return branches.get(String(selected.index));
  const allowedValues = [...new Set(objects.flatMap(({ properties }) => valuesOf(properties)))];
  return [
    {
      ...union,
      instancePath: `${union.instancePath}/${pointerSegment(field)}`,
      schemaPath: `${union.schemaPath}/${first.index}/properties/${pointerSegment(field)}/enum`,
      keyword: 'enum',
      params: { allowedValues },
      message: `must be ${listed(allowedValues.map((fixed) => JSON.stringify(fixed)))}`,
    },
  ];
}

/** `#/properties/type/const` → `#/properties/type`: the schema a keyword belongs to. */
function schemaOf(issue: SchemaIssue): string {
  return issue.schemaPath.slice(0, issue.schemaPath.lastIndexOf('/'));
}

/**
 * A field of one fixed value (a tool's `type: mcp`) fails as AJV's "must be equal to constant",
 * which names no value (an `enum`'s message names none of its values either), after "must be
 * string" for a value of another type when AJV reports every failure (the setup file's): one
 * issue naming the value, `must be "mcp"`, as a union of values names them all. The API's AJV
 * stops at a value's first failure, its type: that "must be string" names the values its schema
 * fixes too.
 */
function nameFixedValues<T extends SchemaIssue>(issues: T[]): T[] {
  const fixed = new Set(issues.filter((issue) => issue.keyword === 'const' || issue.keyword === 'enum'));
  /** Instance path → the schemas of its fixed values. */
  const fixedSchemas = new Map<string, Set<string>>();
  for (const value of fixed) {
    const schemas = fixedSchemas.get(value.instancePath) ?? new Set();
    fixedSchemas.set(value.instancePath, schemas.add(schemaOf(value)));
  }
  const sameSchema = (issue: T) => fixedSchemas.get(issue.instancePath)?.has(schemaOf(issue)) === true;
  return issues.flatMap((issue) => {
    if (fixed.has(issue)) return [{ ...issue, message: `must be ${listed(shapesOf(issue))}` }];
    if (issue.keyword !== 'type') return [issue];
    if (sameSchema(issue)) return [];
    const values = fixedValues(issue.parentSchema);
    return values
      ? [{ ...issue, message: `must be ${listed(values.map((value) => JSON.stringify(value)))}` }]
      : [issue];
  });
}

/** One issue of the list being explained, where it stands in the list's order. */
interface Placed<T> {
  issue: T;
  /**
   * Its place: `[i]` for the i-th issue AJV reported; `[...place, j]` for the j-th issue a union
   * at `place` was explained as, which takes the union's place. Compared item by item.
   */
  place: number[];
}

function byPlace<T>(a: Placed<T>, b: Placed<T>): number {
  for (let i = 0; i < Math.min(a.place.length, b.place.length); i++) {
    if (a.place[i] !== b.place[i]) return a.place[i]! - b.place[i]!;
  }
  return a.place.length - b.place.length;
}

/**
 * The issues not yet explained away, found by instance path: a union looks at those at or below
 * its own value only, not at the whole list (which, once per failed union, took seconds for a
 * setup file of thousands of bad members). An issue is thus looked at by the unions at or above
 * its value only, as many as the schema nests them, however long the list. Explaining adds no
 * instance path: an explained issue is the union's own or one of the issues inside it.
 */
class IssueIndex<T extends SchemaIssue> {
  private readonly atPath = new Map<string, Set<Placed<T>>>();
  private readonly placeOf = new Map<T, Placed<T>>();
  /** Every instance path, sorted: those below a path are one run of it. */
  private readonly paths: string[];

  constructor(issues: T[]) {
    issues.forEach((issue, i) => this.add(issue, [i]));
    this.paths = [...this.atPath.keys()].sort();
  }

  private add(issue: T, place: number[]): void {
    const placed = { issue, place };
    const atPath = this.atPath.get(issue.instancePath) ?? new Set();
    this.atPath.set(issue.instancePath, atPath.add(placed));
    this.placeOf.set(issue, placed);
  }

  private remove(placed: Placed<T>): void {
    this.atPath.get(placed.issue.instancePath)?.delete(placed);
    if (this.placeOf.get(placed.issue) === placed) this.placeOf.delete(placed.issue);
  }

  /** `path` and the paths below it (`path/…`). */
  private *pathsFrom(path: string): Generator<string> {
    yield path;
    const below = `${path}/`;
    let low = 0;
    let high = this.paths.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (this.paths[middle]! < below) low = middle + 1;
      else high = middle;
    }
    for (let i = low; i < this.paths.length && this.paths[i]!.startsWith(below); i++) yield this.paths[i]!;
  }

  /** The issues AJV reported inside `union`, in the list's order. */
  inside(union: T): Placed<T>[] {
    // Every item of a list shares one schema path: the instance path keeps items apart.
    const schemaPath = `${union.schemaPath}/`;
    const inside: Placed<T>[] = [];
    for (const path of this.pathsFrom(union.instancePath)) {
      for (const placed of this.atPath.get(path) ?? []) {
        if (placed.issue.schemaPath.startsWith(schemaPath)) inside.push(placed);
      }
    }
    return inside.sort(byPlace);
  }

  /** `inside` taken out; `explained` in the union's place, if it is still in the list. */
  replace(union: T, inside: Placed<T>[], explained: T[]): void {
    const unionPlaced = this.placeOf.get(union);
    for (const placed of inside) this.remove(placed);
    if (!unionPlaced) return;
    this.remove(unionPlaced);
    explained.forEach((issue, j) => this.add(issue, [...unionPlaced.place, j]));
  }

  issues(): T[] {
    return [...this.atPath.values()]
      .flatMap((atPath) => [...atPath])
      .sort(byPlace)
      .map((placed) => placed.issue);
  }
}

/**
 * Each failed union's issues explained (explainUnion), and each fixed value named
 * (nameFixedValues). AJV reports a union within another (`visibility`: three literals, or null)
 * before the one holding it, so the inner one is explained first and the outer one lists its
 * shapes.
 */
export function explainUnions<T extends SchemaIssue>(validation: T[]): T[] {
  const index = new IssueIndex(validation);
  for (const union of validation.filter(isFailedUnion)) {
    const inside = index.inside(union);
    if (inside.length === 0) continue;
    const explained = explainUnion(
      union,
      inside.map(({ issue }) => issue),
    );
    index.replace(union, inside, explained);
  }
  return nameFixedValues(index.issues());
}
