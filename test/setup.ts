import { afterAll, expect } from 'vitest';
import { responseViolations } from './helpers/response-check.js';

// Every JSON response a test produced must match the schema its route declares (OpenAPI truth).
afterAll(() => {
  expect(responseViolations).toEqual([]);
});
