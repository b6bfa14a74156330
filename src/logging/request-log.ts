import { type FastifyReply, type FastifyRequest, LogController } from 'fastify';

/**
 * One log line per request, written once it is answered, with what Fastify's separate
 * "incoming request" line said (method, path, client address): half the logging cost of every
 * request (issue 16). Errors, stream faults and the rest stay Fastify's own lines.
 */
export class OneLinePerRequest extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(
    error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    if (this.isLogDisabled(request)) return;
    const details = { req: request, res: reply, responseTime: reply.elapsedTime };
    if (error) reply.log.error({ ...details, err: error }, 'request errored');
    else reply.log.info(details, 'request completed');
  }
}
