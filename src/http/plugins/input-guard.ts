import type { FastifyInstance } from 'fastify';
import { errors, type ValidationIssue } from '../../errors.js';
import { unstorableTextReason } from '../../text.js';

/** Deeper than any request of the API needs; deep enough input overflows the stack of JSON.stringify. */
export const MAX_INPUT_DEPTH = 64;

/** The first string (value or key) that cannot be stored, or nesting past the limit. */
export function findUnstorableInput(root: unknown, rootPath: string): ValidationIssue | null {
  // Iterative: the input this guards against is exactly the one that would overflow recursion.
  const stack: Array<{ value: unknown; path: string; depth: number }> = [
    { value: root, path: rootPath, depth: 0 },
  ];
  while (stack.length > 0) {
    const { value, path, depth } = stack.pop()!;
    if (typeof value === 'string') {
      const reason = unstorableTextReason(value);
      if (reason) return { path, message: reason };
    } else if (value !== null && typeof value === 'object') {
      if (depth >= MAX_INPUT_DEPTH)
        return { path, message: `is nested more than ${MAX_INPUT_DEPTH} levels deep` };
      for (const [key, child] of Object.entries(value)) {
        const childPath = `${path}.${key}`;
        const reason = unstorableTextReason(key);
        if (reason) return { path: childPath, message: `has a key that ${reason}` };
        stack.push({ value: child, path: childPath, depth: depth + 1 });
      }
    }
  }
  return null;
}

/**
 * Before validation, for every /v1 route: a path id that cannot be stored names nothing (404);
 * such a query or body string, or a body nested past the limit, is the client's mistake (400).
 * Without it, PostgreSQL would answer a NUL with an error (500) where SQLite answers 404 or 200.
 */
export function registerInputGuard(scope: FastifyInstance): void {
  scope.addHook('preValidation', async (request) => {
    for (const value of Object.values((request.params ?? {}) as Record<string, unknown>)) {
      if (typeof value === 'string' && unstorableTextReason(value)) throw errors.notFound('Resource');
    }
    const issue = findUnstorableInput(request.query, 'query') ?? findUnstorableInput(request.body, 'body');
    if (issue) throw errors.badRequest(`${issue.path} ${issue.message}`, [issue]);
  });
}
