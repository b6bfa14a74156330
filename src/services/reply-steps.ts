/** Steps of a reply's tool loop (model call, tool calls, model call…) one request may take. */
export const MAX_STEPS = 8;
