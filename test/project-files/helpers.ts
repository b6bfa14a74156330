import type { FastifyInstance } from 'fastify';
import { KEYS } from '../helpers/fixtures.js';

export const OWNER = { 'x-service-api-key': KEYS.mainOwner };
export const PROJECT = 'prj_docs';
export const WORKSPACE = 'wsp_main';
export const PREFIX = `projects/${WORKSPACE}/${PROJECT}/`;

/** The /v1 file endpoints of one project, through inject (no port). */
export function filesApi(app: FastifyInstance, projectId = PROJECT, headers: Record<string, string> = OWNER) {
  const base = `/v1/projects/${projectId}/files`;
  return {
    requestUpload: (body: unknown) =>
      app.inject({ method: 'POST', url: `${base}/upload`, headers, payload: body as object }),
    sync: () => app.inject({ method: 'POST', url: `${base}/sync`, headers }),
    list: (query = '') => app.inject({ method: 'GET', url: `${base}${query}`, headers }),
    download: (fileId: string) => app.inject({ method: 'GET', url: `${base}/${fileId}/download`, headers }),
    remove: (fileId: string) => app.inject({ method: 'DELETE', url: `${base}/${fileId}`, headers }),
  };
}

/** A signed URL as the path + query inject understands (origin dropped). */
export function injectable(url: string): string {
  const parsed = new URL(url);
  return parsed.pathname + parsed.search;
}
