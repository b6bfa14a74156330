import type { Kysely } from 'kysely';

/**
 * `project_files.object_modified_at`: the time storage gave as the object's last modification
 * when sync last read its content type. S3's listing carries ETag, size and that time, but no
 * content type, and an ETag is the MD5 of the bytes: the same bytes uploaded again with another
 * type look unchanged. A listed time other than the recorded one makes sync read the type again
 * (one HEAD), so such a re-upload changes the record's `mimeType`; the time is recorded only
 * while no upload URL for the path is live (services/project-files.ts says why). Null for
 * records from before, and while uploading: the type is read at the next sync.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('project_files').addColumn('object_modified_at', 'text').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('project_files').dropColumn('object_modified_at').execute();
}
