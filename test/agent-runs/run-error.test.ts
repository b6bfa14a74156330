import { describe, expect, it } from 'vitest';
import { runErrorView, storedRunError } from '../../src/services/run-error.js';

describe("a run's stored error, as a run read back shows it", () => {
  it('reads back the code and message it was stored with', () => {
    const error = { code: 'upstream_error' as const, message: 'The model provider answered HTTP 500: busy' };
    expect(runErrorView(storedRunError(error))).toEqual(error);
    expect(runErrorView(null)).toBeNull();
  });

  it("gives a sub-agent run stored with its message alone (before the code was kept) its message's code", () => {
    expect(runErrorView('The model provider did not answer within 1500 ms')).toEqual({
      code: 'upstream_timeout',
      message: 'The model provider did not answer within 1500 ms',
    });
    expect(runErrorView('The server shut down while this run was being generated')).toMatchObject({
      code: 'service_unavailable',
    });
    expect(runErrorView('The lead reply was stopped before this run was done')).toMatchObject({
      code: 'conflict',
    });
    expect(runErrorView('The model provider answered HTTP 401')).toEqual({
      code: 'upstream_error',
      message: 'The model provider answered HTTP 401',
    });
    // A colon does not make a code of what is none.
    expect(runErrorView('The model provider failed: odd')).toEqual({
      code: 'upstream_error',
      message: 'The model provider failed: odd',
    });
  });
});
