/**
 * `response` with its body piped through `through` (as it is when not given) so that `signal`'s
 * abort cancels the body itself, which closes the connection to the server.
 *
 * Node's fetch (undici) cancels the body on the abort too, but reaches the request through a
 * WeakRef to the Request object it made. Once the Response has been returned, that Request lives
 * only as long as undici's own copy of the fetch's parameters, which it makes for every request
 * except one with `redirect: 'error'` (the MCP transport's): for such a request, after a garbage
 * collection the abort reached nothing and a server that had stopped part way through its answer
 * kept the connection open until it gave up itself. The pipe's listener holds what it needs,
 * whatever undici keeps.
 */
export function withBodyCancelledOnAbort(
  response: Response,
  signal: AbortSignal | undefined,
  through: TransformStream<Uint8Array, Uint8Array> = new TransformStream(),
): Response {
  if (!response.body) return response;
  return new Response(response.body.pipeThrough(through, { signal }), {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}
