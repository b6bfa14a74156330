import type { Generated } from 'kysely';

/**
 * Kysely table types. Both engines store the same shapes: timestamps as ISO 8601 text (which
 * sorts in time order), booleans as 0/1 integers, structured values as JSON text.
 */
export interface Database {
  organizations: OrganizationTable;
  users: UserTable;
  workspaces: WorkspaceTable;
  workspace_members: WorkspaceMemberTable;
  api_keys: ApiKeyTable;
  providers: ProviderTable;
  models: ModelTable;
  workspace_models: WorkspaceModelTable;
  agents: AgentTable;
  projects: ProjectTable;
  project_files: ProjectFileTable;
  upload_reservations: UploadReservationTable;
  skill_replacements: SkillReplacementTable;
  chats: ChatTable;
  messages: MessageTable;
  agent_runs: AgentRunTable;
  skills: SkillTable;
  usage_ledger: UsageLedgerTable;
  rate_limit_counters: RateLimitCounterTable;
  usage_reservations: UsageReservationTable;
  usage_daily: UsageDailyTable;
  knowledge_texts: KnowledgeTextTable;
  knowledge_chunks: KnowledgeChunkTable;
  knowledge_vectors: KnowledgeVectorTable;
  knowledge_embedding_state: KnowledgeEmbeddingStateTable;
}

export interface OrganizationTable {
  id: string;
  name: string;
  created_at: string;
  updated_at: string;
}

export interface UserTable {
  id: string;
  organization_id: string;
  name: string;
  email: string;
  created_at: string;
  updated_at: string;
}

export interface WorkspaceTable {
  id: string;
  organization_id: string;
  name: string;
  default_model: string | null;
  /** The model (`kind: embedding`) that gives project chunks vectors; null: lexical search only. */
  embedding_model: string | null;
  monthly_tokens: number | null;
  monthly_cost_usd: number | null;
  chat_spend_cap_usd: number | null;
  rate_limit_per_minute: number | null;
  created_at: string;
  updated_at: string;
}

export type Role = 'owner' | 'admin' | 'member';

export interface WorkspaceMemberTable {
  workspace_id: string;
  user_id: string;
  role: Role;
  created_at: string;
}

export type ApiKeyKind = 'workspace' | 'organization' | 'session';

/** Who manages a row: the setup file or the API (management.md). */
export type ManagedBy = 'setup' | 'api';

export interface ApiKeyTable {
  id: string;
  name: string;
  kind: ApiKeyKind;
  organization_id: string;
  /** Set for workspace keys only. */
  workspace_id: string | null;
  user_id: string;
  /** SHA-256 of the plaintext key, hex. The plaintext is never stored. */
  key_hash: string;
  /** The first characters of the key, to tell keys apart in listings. */
  key_prefix: string;
  expires_at: string | null;
  revoked_at: string | null;
  last_used_at: string | null;
  created_at: string;
  /** `setup` for keys a setup file declares; keys made over the API or with `atrium keys create` are `api`. */
  managed_by: ManagedBy;
  /** Session tokens only: JSON array of the agent ids the token is limited to, or null (all). */
  agent_ids: string | null;
  /** Session tokens only: the key that made the token, which it never outlives (null: made before 034). */
  made_by_key_id: string | null;
}

export type ProviderType = 'openai' | 'anthropic' | 'openai-compatible';

export interface ProviderTable {
  id: string;
  type: ProviderType;
  base_url: string | null;
  api_key: string | null;
  api_key_env: string | null;
  created_at: string;
  updated_at: string;
}

export type ModelKind = 'chat' | 'embedding';

export interface ModelTable {
  id: string;
  provider_id: string;
  provider_model: string;
  kind: ModelKind;
  input_per_mtok: number;
  output_per_mtok: number;
  created_at: string;
  updated_at: string;
}

export interface WorkspaceModelTable {
  workspace_id: string;
  model_id: string;
}

export type Visibility = 'workspace' | 'organization' | 'private';

export interface AgentTable {
  id: string;
  workspace_id: string;
  title: string;
  /** The title as the agent list orders it (`caseInsensitiveSortKey`), written with the title. */
  title_sort_key: string;
  description: string;
  image: string;
  category: string;
  visibility: Visibility;
  model: string | null;
  instructions: string;
  /** JSON array of tool definitions, e.g. `[{ "type": "mcp", "name": …, "url": … }]`. */
  tools: string;
  /** JSON `{ "agents": [ids] }` or null. */
  orchestration: string | null;
  deleted_at: string | null;
  created_at: string;
  updated_at: string;
  managed_by: ManagedBy;
}

export interface ProjectTable {
  id: string;
  workspace_id: string;
  name: string;
  description: string;
  instructions: string;
  color: string;
  icon: string;
  memory: string;
  archived: number;
  created_at: string;
  updated_at: string;
  /** Null: created before ownership was recorded; the API treats it as `api` (010-management). */
  managed_by: ManagedBy | null;
}

/** An upload URL not expired yet and the bytes it may bring (017-upload-reservations). */
/** A replace upload under way, holding its skill until it ends or expires (018-skill-replacements). */
export interface SkillReplacementTable {
  skill_id: string;
  holder: string;
  expires_at: string;
}

export interface UploadReservationTable {
  project_id: string;
  workspace_id: string;
  path: string;
  size_bytes: number;
  expires_at: string;
}

export interface ProjectFileTable {
  id: string;
  workspace_id: string;
  project_id: string;
  name: string;
  path: string;
  mime_type: string;
  size_bytes: number;
  /** Storage's fingerprint of the content (ETag or mtime+size), to tell a replaced object. */
  etag: string;
  type: string;
  created_at: string;
  updated_at: string;
  synced_at: string;
  /**
   * The object's last-modified time (ISO) as storage listed it when its type was last read
   * (020-project-file-object-times); a listing with another time makes sync read the type again.
   */
  object_modified_at: Generated<string | null>;
  /** Index state (011-knowledge); sync sets `pending` with every new content. */
  index_status: Generated<IndexStatus>;
  /** Why the last attempt failed (kept on `failed`), else null. */
  index_error: Generated<string | null>;
  /** Claims since the last success; a file reaching the limit becomes `failed`. */
  index_attempts: Generated<number>;
  /** Earliest time a `pending` file that failed before is tried again; null: now. */
  index_retry_at: Generated<string | null>;
  /** The process indexing the file, while `indexing`. */
  index_claimed_by: Generated<string | null>;
  /** When that claim lapses (a process that died mid-index holds none past it). */
  index_lease_until: Generated<string | null>;
  /** The etag whose text and chunks are in the index; null: none yet. */
  indexed_etag: Generated<string | null>;
}

export type IndexStatus = 'pending' | 'indexing' | 'indexed' | 'failed' | 'unsupported';

/** The text extracted from the indexed version of a file (011-knowledge). */
export interface KnowledgeTextTable {
  file_id: string;
  workspace_id: string;
  project_id: string;
  /** The file version the text was extracted from. */
  etag: string;
  /** What the extractor read it as, e.g. `markdown`, `pdf`. */
  format: string;
  text: string;
  chars: number;
  indexed_at: string;
}

/** One chunk of an indexed file; full-text indexed (FTS5 on SQLite, tsvector on PostgreSQL). */
export interface KnowledgeChunkTable {
  id: Generated<number>;
  workspace_id: string;
  project_id: string;
  file_id: string;
  /** Order of the chunk in its file, from 0. */
  ordinal: number;
  text: string;
  /** Heading path, e.g. `Install › Linux`, or sheet and rows; null when none. */
  heading: string | null;
  /** JSON array of PDF page numbers, or null. */
  pages: string | null;
  /** Character offsets of the chunk in the file's extracted text. */
  start_offset: number;
  end_offset: number;
  /** PostgreSQL only: the chunk's search vector (never selected; written on insert). */
  tsv?: string | null;
}

export interface ChatTable {
  id: string;
  workspace_id: string;
  agent_id: string;
  project_id: string | null;
  title: string;
  spend_usd: number;
  /** The client's own id for the chat (`useChat`'s id), unique per workspace; null: none. */
  client_id: string | null;
  /** The user of the key that created the chat (null for chats older than this column). */
  created_by: string | null;
  /** The end user the caller named in `systemVariables.user.id`. */
  end_user: string | null;
  message_count: number;
  last_message_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface MessageTable {
  id: string;
  chat_id: string;
  workspace_id: string;
  role: 'user' | 'assistant' | 'system';
  /** JSON array of UI message parts. */
  parts: string;
  /** Order of the message in its chat. */
  position: number;
  model: string | null;
  input_tokens: number;
  output_tokens: number;
  cost_usd: number;
  /**
   * The share of the usage above that the reply's sub-agent runs spent: the usage report counts
   * it under their agents and models, not the reply's (migration 026). 0 when left out.
   */
  sub_agent_input_tokens?: number;
  sub_agent_output_tokens?: number;
  sub_agent_cost_usd?: number;
  /** Why an assistant message ended: `stop`, `length`, `stopped`, `interrupted`, …; null for others. */
  finish_reason: string | null;
  created_at: string;
}

export interface AgentRunTable {
  id: string;
  workspace_id: string;
  agent_id: string;
  chat_id: string | null;
  status: 'completed' | 'failed';
  input: string;
  response: string;
  error: string | null;
  execution_time_ms: number;
  input_tokens: number;
  output_tokens: number;
  cost_usd: number;
  created_at: string;
  completed_at: string;
  /** The user whose key made the run; null (or left out) for runs made before it was recorded. */
  user_id?: string | null;
  /** The tool set-up warnings its POST answered (JSON array); null (or left out) when none. */
  warnings?: string | null;
  /** The project file passages its POST answered (JSON array of SourceView); null when none. */
  sources?: string | null;
}

export interface SkillTable {
  id: string;
  workspace_id: string;
  name: string;
  /** The name as the skill list orders it (`caseInsensitiveSortKey`), written with the name. */
  name_sort_key: string;
  description: string;
  visibility: Visibility;
  owner_user_id: string;
  storage_path: string;
  /** JSON of the remaining front matter (license, allowed-tools, metadata). */
  metadata: string;
  created_at: string;
  updated_at: string;
}

export interface UsageLedgerTable {
  workspace_id: string;
  /** `YYYY-MM` in UTC. */
  month: string;
  input_tokens: number;
  output_tokens: number;
  cost_usd: number;
  updated_at: string;
}

export interface RateLimitCounterTable {
  /** What is counted (an API key id). */
  key: string;
  /** Epoch milliseconds of the window's start. */
  window_start: number;
  count: number;
}

/** Usage promised to a model request in flight, counted against limits until it settles. */
export interface UsageReservationTable {
  id: string;
  workspace_id: string;
  chat_id: string | null;
  process_id: string;
  tokens: number;
  cost_usd: number;
  created_at: string;
  expires_at: string;
}

/** Model replies summed by workspace, UTC day, agent and model; kept by a trigger (010-management). */
export interface UsageDailyTable {
  workspace_id: string;
  /** `YYYY-MM-DD` in UTC. */
  date: string;
  agent_id: string;
  model: string;
  input_tokens: number;
  output_tokens: number;
  cost_usd: number;
  requests: number;
}

/** A chunk's vector under one embedding model (012-knowledge-vectors). */
export interface KnowledgeVectorTable {
  /** `<model id>|<provider>|<provider model>`: vectors of different models never mix. */
  model_key: string;
  chunk_id: number;
  project_id: string;
  /** float32 little-endian bytes on SQLite; `real[]` (numbers) on PostgreSQL. */
  embedding: Buffer | number[];
}

/** Who embeds a workspace's chunks now, and how the last attempt went. */
export interface KnowledgeEmbeddingStateTable {
  workspace_id: string;
  model_key: string;
  lease_owner: string | null;
  lease_until: string | null;
  failures: number;
  next_attempt_at: string | null;
  last_error: string | null;
  updated_at: string;
}
