import { type Kysely, sql } from 'kysely';
import { agentImageProblem } from '../../agent-fields.js';

/** Rows read per statement while images are checked. */
const BATCH = 500;

/**
 * An agent's `image` goes into a UI's `src` or `href`, so it must be a web URL or an inline
 * image (agent-fields.ts, agentImageProblem). Agents stored before that rule may hold any
 * string, such as a `javascript:` URL that a UI would run: each such image is cleared to `""`
 * (what an agent without one shows). The rule is code (a URL parser), not SQL, so rows are read
 * in batches by id and checked here. Going down restores nothing: the images are not kept.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  let after = '';
  for (;;) {
    const { rows } = await sql<{ id: string; image: string }>`
      select id, image from agents where id > ${after} and image <> '' order by id limit ${BATCH}`.execute(
      db,
    );
    if (rows.length === 0) break;
    after = rows[rows.length - 1]!.id;
    for (const row of rows) {
      if (agentImageProblem(row.image) === null) continue;
      await sql`update agents set image = '' where id = ${row.id}`.execute(db);
    }
  }
}

export async function down(): Promise<void> {}
