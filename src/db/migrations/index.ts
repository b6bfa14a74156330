import type { Migration } from 'kysely';
import * as initial from './001-initial.js';
import * as chatMessagesAndRunUsage from './002-chat-messages-and-run-usage.js';
import * as sharedLimits from './003-shared-limits.js';
import * as management from './010-management.js';
import * as chatHistory from './003-chat-history.js';
import * as knowledge from './011-knowledge.js';
import * as knowledgeVectors from './012-knowledge-vectors.js';
import * as knowledgeSearchIndex from './014-knowledge-search-index.js';
import * as knowledgeGinPendingLimit from './015-knowledge-gin-pending-limit.js';
import * as changeNotices from './016-change-notices.js';
import * as uploadReservations from './017-upload-reservations.js';
import * as skillReplacements from './018-skill-replacements.js';
import * as knowledgeFoldedSearchText from './019-knowledge-folded-search-text.js';
import * as projectFileObjectTimes from './020-project-file-object-times.js';
import * as knowledgeCjkWords from './021-knowledge-cjk-words.js';
import * as knowledgeCaseFoldedWords from './022-knowledge-case-folded-words.js';
import * as knowledgeScopeFile from './023-knowledge-scope-file.js';
import * as caseFoldedSortKeys from './024-case-folded-sort-keys.js';
import * as uploadReservationsPerUrl from './025-upload-reservations-per-url.js';
import * as subAgentUsageRollup from './026-sub-agent-usage-rollup.js';
import * as knowledgeFtsProjectScope from './027-knowledge-fts-project-scope.js';
import * as codePointListingIds from './028-code-point-listing-ids.js';
import * as knowledgeFtsExactStatistics from './029-knowledge-fts-exact-statistics.js';

/**
 * Every migration, in order. Listed here (not read from a folder) so that the same code runs
 * compiled from dist/ and from source under the test runner. New ones append a line.
 */
export const migrations: Record<string, Migration> = {
  '001-initial': initial,
  '002-chat-messages-and-run-usage': chatMessagesAndRunUsage,
  '003-shared-limits': sharedLimits,
  '010-management': management,
  '003-chat-history': chatHistory,
  '011-knowledge': knowledge,
  '012-knowledge-vectors': knowledgeVectors,
  '014-knowledge-search-index': knowledgeSearchIndex,
  '015-knowledge-gin-pending-limit': knowledgeGinPendingLimit,
  '016-change-notices': changeNotices,
  '017-upload-reservations': uploadReservations,
  '018-skill-replacements': skillReplacements,
  '019-knowledge-folded-search-text': knowledgeFoldedSearchText,
  '020-project-file-object-times': projectFileObjectTimes,
  '021-knowledge-cjk-words': knowledgeCjkWords,
  '022-knowledge-case-folded-words': knowledgeCaseFoldedWords,
  '023-knowledge-scope-file': knowledgeScopeFile,
  '024-case-folded-sort-keys': caseFoldedSortKeys,
  '025-upload-reservations-per-url': uploadReservationsPerUrl,
  '026-sub-agent-usage-rollup': subAgentUsageRollup,
  '027-knowledge-fts-project-scope': knowledgeFtsProjectScope,
  '028-code-point-listing-ids': codePointListingIds,
  '029-knowledge-fts-exact-statistics': knowledgeFtsExactStatistics,
};
