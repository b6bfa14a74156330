/** What a provider call made through `fetch` fails with (undefined when it succeeds). */
export function callFailure(fetch: typeof globalThis.fetch, url: string): Promise<unknown> {
  return fetch(url, { method: 'POST', body: '{}' }).then(
    () => undefined,
    (error: unknown) => error,
  );
}
