import type { FastifyInstance } from 'fastify';
import { errors, type ValidationIssue } from '../../errors.js';
import { unstorableTextReason } from '../../text.js';

/** Deeper than any request of the API needs; deep enough input overflows the stack of JSON.stringify. */
export const MAX_INPUT_DEPTH = 64;

/**
 * Parsed bodies whose text showed they hold nothing to refuse (json-containers.ts,
 * isPlainJsonWithin), marked by the JSON body parser: the guard does not walk them.
 */
const plainBodies = new WeakSet<object>();

export function markPlainBody(body: object): void {
  plainBodies.add(body);
}

/** The first string (value or key) that cannot be stored, or nesting past the limit. */
export function findUnstorableInput(root: unknown, rootPath: string): ValidationIssue | null {
  // Iterative: the input this guards against is exactly the one that would overflow recursion.
  // Paths are spelled out only for the issue found, not for every value looked at.
  const stack: InputNode[] = [{ value: root, parent: undefined, key: rootPath, depth: 0 }];
  while (stack.length > 0) {
    const node = stack.pop()!;
    const { value, depth } = node;
    if (typeof value === 'string') {
      const reason = unstorableTextReason(value);
      if (reason) return { path: pathOf(node), message: reason };
    } else if (value !== null && typeof value === 'object') {
      if (depth >= MAX_INPUT_DEPTH)
        return { path: pathOf(node), message: `is nested more than ${MAX_INPUT_DEPTH} levels deep` };
      for (const key in value) {
        if (!Object.hasOwn(value, key)) continue;
        const child: InputNode = {
          value: (value as Record<string, unknown>)[key],
          parent: node,
          key,
          depth: depth + 1,
        };
        const reason = unstorableTextReason(key);
        if (reason) return { path: pathOf(child), message: `has a key that ${reason}` };
        stack.push(child);
      }
    }
  }
  return null;
}

interface InputNode {
  value: unknown;
  parent: InputNode | undefined;
  key: string;
  depth: number;
}

function pathOf(node: InputNode): string {
  return node.parent ? `${pathOf(node.parent)}.${node.key}` : node.key;
}

/**
 * Before validation, for every /v1 route: a path id that cannot be stored names nothing (404);
 * such a query or body string, or a body nested past the limit, is the client's mistake (400).
 * Without it, PostgreSQL would answer a NUL with an error (500) where SQLite answers 404 or 200.
 */
export function registerInputGuard(scope: FastifyInstance): void {
  // Callback style: nothing here waits, so no promise per request.
  scope.addHook('preValidation', (request, _reply, done) => {
    for (const value of Object.values((request.params ?? {}) as Record<string, unknown>)) {
      if (typeof value === 'string' && unstorableTextReason(value)) {
        done(errors.notFound('Resource'));
        return;
      }
    }
    const { body } = request;
    const plain = typeof body === 'object' && body !== null && plainBodies.has(body);
    const issue =
      findUnstorableInput(request.query, 'query') ?? (plain ? null : findUnstorableInput(body, 'body'));
    done(issue ? errors.badRequest(`${issue.path} ${issue.message}`, [issue]) : undefined);
  });
}
