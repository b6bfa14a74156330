import type { ErrorObject } from 'ajv';

/**
 * What explaining a union needs of an AJV error: the API's (Fastify's validation errors) and the
 * setup file's (AJV's own) both have it.
 */
export type SchemaIssue = Pick<ErrorObject, 'instancePath' | 'schemaPath' | 'keyword' | 'params' | 'message'>;

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
    branches.set(branch, [...(branches.get(branch) ?? []), issue]);
  }
  const mismatches = (branch: T[]) => branch.filter((issue) => isShapeMismatch(issue, union.instancePath));
  const fitting = [...branches.values()].find((branch) => mismatches(branch).length === 0);
  if (fitting) return fitting;
  const shapes = [...new Set([...branches.values()].flatMap((branch) => branchShapes(mismatches(branch))))];
  return [{ ...union, params: { shapes }, message: `must be ${listed(shapes)}` }];
}

/** `#/properties/type/const` → `#/properties/type`: the schema a keyword belongs to. */
function schemaOf(issue: SchemaIssue): string {
  return issue.schemaPath.slice(0, issue.schemaPath.lastIndexOf('/'));
}

/**
 * A field of one fixed value (a tool's `type: mcp`) fails as AJV's "must be equal to constant",
 * which names no value (an `enum`'s message names none of its values either), after "must be string" for a value of another type when AJV reports every
 * failure (the setup file's): one issue naming the value, `must be "mcp"`, as a union of values
 * names them all.
 */
function nameFixedValues<T extends SchemaIssue>(issues: T[]): T[] {
  const fixed = issues.filter((issue) => issue.keyword === 'const' || issue.keyword === 'enum');
  const sameSchema = (issue: T) =>
    fixed.some((value) => value.instancePath === issue.instancePath && schemaOf(value) === schemaOf(issue));
  return issues.flatMap((issue) => {
    if (fixed.includes(issue)) return [{ ...issue, message: `must be ${listed(shapesOf(issue))}` }];
    return issue.keyword === 'type' && sameSchema(issue) ? [] : [issue];
  });
}

/**
 * Each failed union's issues explained (explainUnion), and each fixed value named
 * (nameFixedValues). AJV reports a union within another (`visibility`: three literals, or null)
 * before the one holding it, so the inner one is explained first and the outer one lists its
 * shapes.
 */
export function explainUnions<T extends SchemaIssue>(validation: T[]): T[] {
  let issues = validation;
  for (const union of validation.filter(isFailedUnion)) {
    // Every item of a list shares one schema path: the instance path keeps items apart.
    const inside = issues.filter(
      (issue) =>
        issue.schemaPath.startsWith(`${union.schemaPath}/`) &&
        (issue.instancePath === union.instancePath ||
          issue.instancePath.startsWith(`${union.instancePath}/`)),
    );
    if (inside.length === 0) continue;
    const explained = explainUnion(union, inside);
    issues = issues.flatMap((issue) => (issue === union ? explained : inside.includes(issue) ? [] : [issue]));
  }
  return nameFixedValues(issues);
}
