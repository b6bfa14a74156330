import { describe, expect, it } from 'vitest';
import { isRetryableConflict, retryOnConflict } from '../../src/db/conflict-retry.js';

const pgError = (code: string) => Object.assign(new Error(`pg ${code}`), { code });
const noPause = async () => {};

describe('retryOnConflict', () => {
  it('runs a transaction again after a deadlock or a serialization failure', async () => {
    const failures = [pgError('40P01'), pgError('40001')];
    let runs = 0;
    const result = await retryOnConflict(
      async () => {
        runs++;
        const failure = failures.shift();
        if (failure) throw failure;
        return 'committed';
      },
      { pause: noPause },
    );
    expect(result).toBe('committed');
    expect(runs).toBe(3);
  });

  it('throws any other error at once', async () => {
    let runs = 0;
    const unique = pgError('23505');
    await expect(
      retryOnConflict(
        async () => {
          runs++;
          throw unique;
        },
        { pause: noPause },
      ),
    ).rejects.toBe(unique);
    expect(runs).toBe(1);
  });

  it('gives up after the last attempt with the database error', async () => {
    let runs = 0;
    await expect(
      retryOnConflict(
        async () => {
          runs++;
          throw pgError('40P01');
        },
        { attempts: 3, pause: noPause },
      ),
    ).rejects.toMatchObject({ code: '40P01' });
    expect(runs).toBe(3);
  });

  it('tells conflicts from other failures', () => {
    expect(isRetryableConflict(pgError('40P01'))).toBe(true);
    expect(isRetryableConflict(pgError('40001'))).toBe(true);
    expect(isRetryableConflict(pgError('57014'))).toBe(false);
    expect(isRetryableConflict(new Error('plain'))).toBe(false);
    expect(isRetryableConflict(null)).toBe(false);
  });
});
