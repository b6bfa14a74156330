/**
 * A labelled retrieval set: the files of a fictional logistics company (Halcyon Freight) in every
 * format the index reads, and questions as a user would ask them, each labelled with the file
 * that answers it. Questions paraphrase their passage (other words, synonyms, no copied
 * sentences), and the files share vocabulary on purpose (several policies, runbooks, price
 * tables), so recall measures retrieval rather than string matching.
 *
 * Used by the lexical and hybrid recall tests; deterministic (no randomness, no clock).
 */
import {
  csvFile,
  docxFile,
  htmlFile,
  MEDIA,
  pdfFile,
  tableFile,
  textFile,
  xlsxFile,
  type TestFile,
} from './files.js';

export interface RetrievalQuestion {
  question: string;
  /** Path of the file that answers it. */
  expectedPath: string;
  /** A phrase of the answering passage, for a reader checking the label. */
  phrase?: string;
}

export interface RetrievalSet {
  files: TestFile[];
  questions: RetrievalQuestion[];
}

const q = (question: string, expectedPath: string, phrase?: string): RetrievalQuestion => ({
  question,
  expectedPath,
  phrase,
});

export async function buildRetrievalSet(): Promise<RetrievalSet> {
  const files: TestFile[] = [
    textFile('runbooks/database-failover.md', DATABASE_FAILOVER, MEDIA.markdown),
    textFile('runbooks/incident-response.md', INCIDENT_RESPONSE, MEDIA.markdown),
    textFile('api/authentication.md', API_AUTHENTICATION, MEDIA.markdown),
    textFile('api/webhooks.md', API_WEBHOOKS, MEDIA.markdown),
    textFile('engineering/release-process.md', RELEASE_PROCESS, MEDIA.markdown),
    textFile('meetings/2026-10-05-product-sync.md', PRODUCT_SYNC, MEDIA.markdown),
    textFile('meetings/2026-10-19-ops-review.txt', OPS_REVIEW),
    textFile('engineering/architecture-overview.txt', ARCHITECTURE),
    htmlFile('api/rate-limits.html', RATE_LIMITS_HTML),
    htmlFile('support/customer-faq.html', CUSTOMER_FAQ_HTML),
    htmlFile('people/onboarding-checklist.html', ONBOARDING_HTML),
    textFile('src/billing/invoice.ts', INVOICE_TS, MEDIA.typescript),
    textFile('src/routing/route_optimizer.py', ROUTE_OPTIMIZER_PY, MEDIA.python),
    {
      path: 'config/feature-flags.json',
      mediaType: MEDIA.json,
      bytes: Buffer.from(JSON.stringify(FEATURE_FLAGS)),
    },
    csvFile('data/warehouses.csv', WAREHOUSE_ROWS),
    csvFile('data/carriers.csv', CARRIER_ROWS),
    tableFile('data/sla-credits.tsv', SLA_CREDIT_ROWS, '\t'),
    await pdfFile('policies/remote-work-policy.pdf', REMOTE_WORK_PAGES),
    await pdfFile('people/employee-handbook.pdf', HANDBOOK_PAGES),
    await docxFile('policies/expense-policy.docx', EXPENSE_POLICY),
    await docxFile('policies/information-security.docx', SECURITY_POLICY),
    await docxFile('legal/data-retention.docx', DATA_RETENTION),
    await xlsxFile('sales/price-list.xlsx', PRICE_LIST),
    await xlsxFile('finance/2027-budget.xlsx', BUDGET),
  ];
  return { files, questions: QUESTIONS };
}

const QUESTIONS: RetrievalQuestion[] = [
  // runbooks/database-failover.md
  q(
    'How do I promote the standby Postgres when the primary dies?',
    'runbooks/database-failover.md',
    'pg_ctl promote',
  ),
  q(
    'What replication lag is acceptable before we fail over the database?',
    'runbooks/database-failover.md',
    '30 seconds',
  ),
  q(
    'After a DB switchover, how do we point the app at the new primary?',
    'runbooks/database-failover.md',
    'DNS record',
  ),
  // runbooks/incident-response.md
  q('Who should be paged for a sev1 outage?', 'runbooks/incident-response.md', 'incident commander'),
  q(
    'How fast must the status page be updated during a major incident?',
    'runbooks/incident-response.md',
    '15 minutes',
  ),
  q('When is a postmortem due after an incident?', 'runbooks/incident-response.md', 'five working days'),
  // api/authentication.md
  q('How long is an OAuth access token valid?', 'api/authentication.md', '60 minutes'),
  q(
    'How can a customer rotate their API secret without downtime?',
    'api/authentication.md',
    'two active keys',
  ),
  q('Which header carries the API key on requests?', 'api/authentication.md', 'X-Halcyon-Key'),
  // api/webhooks.md
  q('How do I check that a webhook call really came from Halcyon?', 'api/webhooks.md', 'HMAC-SHA256'),
  q('How many times is a failed webhook delivery retried?', 'api/webhooks.md', 'eight attempts'),
  q('Which event fires when a parcel is handed to the customer?', 'api/webhooks.md', 'shipment.delivered'),
  // engineering/release-process.md
  q(
    'When does the code freeze start before a release?',
    'engineering/release-process.md',
    'Wednesday at 12:00',
  ),
  q('How do we ship an urgent fix outside the weekly train?', 'engineering/release-process.md', 'hotfix'),
  q('Who signs off a production release?', 'engineering/release-process.md', 'release captain'),
  // meetings/2026-10-05-product-sync.md
  q(
    'What did the product sync decide about the carbon estimate feature?',
    'meetings/2026-10-05-product-sync.md',
    'CO2',
  ),
  q(
    'Which customer asked for bulk label printing and when will it ship?',
    'meetings/2026-10-05-product-sync.md',
    'Brightmart',
  ),
  // meetings/2026-10-19-ops-review.txt
  q('Why were Rotterdam deliveries late in October?', 'meetings/2026-10-19-ops-review.txt', 'port strike'),
  q(
    'What was the on-time delivery rate reported in the ops review?',
    'meetings/2026-10-19-ops-review.txt',
    '94.2%',
  ),
  // engineering/architecture-overview.txt
  q(
    'Which message broker do the backend services use to talk to each other?',
    'engineering/architecture-overview.txt',
    'NATS',
  ),
  q('Where are shipping label PDFs stored?', 'engineering/architecture-overview.txt', 'object storage'),
  // api/rate-limits.html
  q('How many API calls per minute does the Growth tier allow?', 'api/rate-limits.html', '600'),
  q('What should a client do when it gets HTTP 429?', 'api/rate-limits.html', 'Retry-After'),
  // support/customer-faq.html
  q(
    'Can a customer change the delivery address after dispatch?',
    'support/customer-faq.html',
    'before the parcel leaves',
  ),
  q('How do customers get compensated for a lost parcel?', 'support/customer-faq.html', 'declared value'),
  q('Do you ship to the Canary Islands?', 'support/customer-faq.html', 'Canary Islands'),
  // people/onboarding-checklist.html
  q('What should a new engineer do in their first week?', 'people/onboarding-checklist.html', 'buddy'),
  q('Who gives new hires access to production?', 'people/onboarding-checklist.html', 'platform team'),
  // src/billing/invoice.ts
  q('How are invoice totals rounded?', 'src/billing/invoice.ts', 'half to even'),
  q('Which VAT rate is applied to deliveries inside Germany?', 'src/billing/invoice.ts', '0.19'),
  // src/routing/route_optimizer.py
  q(
    'What is the maximum number of stops on one delivery route?',
    'src/routing/route_optimizer.py',
    'MAX_STOPS_PER_ROUTE',
  ),
  q(
    'How long may a driver drive before a mandatory break in the route planner?',
    'src/routing/route_optimizer.py',
    '270',
  ),
  // config/feature-flags.json
  q('Is the new checkout flow turned on for everyone?', 'config/feature-flags.json', 'new_checkout'),
  q('Which flag controls same-day delivery slots?', 'config/feature-flags.json', 'same_day_slots'),
  // data/warehouses.csv
  q('Who manages the Lyon warehouse?', 'data/warehouses.csv', 'Lyon'),
  q('What are the opening hours of the Gdansk depot?', 'data/warehouses.csv', 'Gdansk'),
  q('Which warehouse has cold storage in Milan?', 'data/warehouses.csv', 'Milan'),
  // data/carriers.csv
  q('What is the on-time SLA of the carrier Nordlink?', 'data/carriers.csv', 'Nordlink'),
  q('Which carrier do we use for pallets to Portugal?', 'data/carriers.csv', 'Portugal'),
  // data/sla-credits.tsv
  q(
    'How much credit does an Enterprise customer get when uptime falls under 99.5%?',
    'data/sla-credits.tsv',
    '25%',
  ),
  q(
    'What service credit applies to the Starter plan for availability below 99%?',
    'data/sla-credits.tsv',
    'Starter',
  ),
  // policies/remote-work-policy.pdf
  q('How much is the home office allowance?', 'policies/remote-work-policy.pdf', 'EUR 600'),
  q('Am I allowed to spend a few weeks working abroad?', 'policies/remote-work-policy.pdf', '30 days'),
  q(
    'What are the core hours when remote staff must be reachable?',
    'policies/remote-work-policy.pdf',
    '10:00 and 15:00',
  ),
  // people/employee-handbook.pdf
  q('How many vacation days do employees get per year?', 'people/employee-handbook.pdf', '28 days'),
  q('What is the parental leave policy?', 'people/employee-handbook.pdf', '16 weeks'),
  q('How long is the probation period for new staff?', 'people/employee-handbook.pdf', 'six months'),
  // policies/expense-policy.docx
  q('What is the daily meal allowance when travelling?', 'policies/expense-policy.docx', 'EUR 45'),
  q('Can I fly business class on a long trip?', 'policies/expense-policy.docx', 'eight hours'),
  q('By when must receipts be submitted for reimbursement?', 'policies/expense-policy.docx', '30 days'),
  // policies/information-security.docx
  q(
    'Is two-factor authentication required for company accounts?',
    'policies/information-security.docx',
    'hardware key',
  ),
  q('How should I report a phishing email?', 'policies/information-security.docx', 'security@halcyon'),
  q('How often do passwords have to be changed?', 'policies/information-security.docx', 'compromise'),
  // legal/data-retention.docx
  q('How long do we keep customer shipment records?', 'legal/data-retention.docx', 'seven years'),
  q('When is GPS tracking data of drivers deleted?', 'legal/data-retention.docx', '90 days'),
  // sales/price-list.xlsx
  q('What does the Growth plan cost per month?', 'sales/price-list.xlsx', 'Growth'),
  q('How much is the insurance add-on per parcel?', 'sales/price-list.xlsx', 'Parcel insurance'),
  q('What discount applies above 10,000 shipments a month?', 'sales/price-list.xlsx', '10000'),
  // finance/2027-budget.xlsx
  q('What is the marketing budget for next year?', 'finance/2027-budget.xlsx', 'Marketing'),
  q('How much money is planned for new trucks in 2027?', 'finance/2027-budget.xlsx', 'Fleet'),
];

const DATABASE_FAILOVER = `# Database failover runbook

This runbook covers the primary PostgreSQL cluster behind the shipment API (cluster \`pg-core\`).
It is written for the on-call engineer; read it once before your first on-call week.

## When to fail over

Fail over only when the primary is unreachable for more than two minutes, or when its disk is
damaged. A slow primary is not a reason to fail over: look at the slow query dashboard first.
Before promoting, check the standby's replication lag on the "pg-core replication" panel. Lag
under 30 seconds is acceptable; with more lag, shipments written in that window will be lost and
you must ask the incident commander before going on.

## Promote the standby

1. Stop writes: set the API to maintenance mode with \`halcyonctl maintenance on\`.
2. On the standby host, run \`sudo -u postgres pg_ctl promote -D /var/lib/postgresql/15/main\`.
3. Wait until \`select pg_is_in_recovery()\` returns false.
4. Fence the old primary so it cannot come back as a second writer: power it off from the
   provider console and mark it "fenced" in the inventory.

## Repoint the application

The services find the database through the DNS record \`db-primary.internal\`. Update that record
to the address of the promoted host (TTL is 30 seconds), then restart the API pods so their
connection pools reconnect: \`kubectl rollout restart deploy/shipment-api\`. Turn maintenance mode
off and watch the error rate for ten minutes.

## Rebuild a standby

Create a new standby from the promoted primary with \`pg_basebackup\`, using the replication slot
named after the host. Until the new standby has caught up, the cluster runs without redundancy:
say so in the incident channel and do not start maintenance on other databases.

## Known problems

- Promotion fails with "could not write to file": the standby's disk is full; free the WAL
  archive directory first.
- Connection errors after repointing usually mean a pod kept an old connection: restart it.
- Never run two primaries. If you are unsure whether the old primary is down, fence it anyway.

## Monitoring after a failover

For the next 24 hours, keep an eye on three panels: write latency of the new primary, the
connection count per service, and the WAL archive backlog. Alert thresholds stay the same; if
write latency doubles compared to the day before, check whether autovacuum is running on the
shipments table and postpone it until the evening.

## Planned switchovers

Twice a year we switch the primary on purpose to prove the procedure works. A planned
switchover is announced in #engineering one week ahead, runs on a Tuesday between 06:00 and
07:00 CET, and follows the same steps as an emergency failover, except that the old primary is
demoted to a standby instead of fenced. The last one (April 2026) took 4 minutes of downtime.

## Backups and point-in-time recovery

Base backups run nightly at 02:00 with WAL archiving to object storage, so any moment of the
last 35 days can be restored. A restore is not a failover: use it when data was deleted or
corrupted by a bad migration, never when a host is simply down. The restore procedure lives in
"runbooks/database-restore" and needs approval from the head of engineering.

## Contacts

Database on-call: the platform team's rotation in PagerDuty. Escalation: the head of platform.
The hosting provider's support line is in the on-call vault entry "provider-support".
`;

const INCIDENT_RESPONSE = `# Incident response

Every production problem that hurts customers is an incident. This page says how we classify,
staff and communicate them.

## Severity levels

- **Sev1**: shipments cannot be booked or tracked for many customers, or data is at risk.
- **Sev2**: one feature is broken for many customers, or everything is slow.
- **Sev3**: a problem with a workaround, or affecting a single customer.

## Who is involved

For a Sev1, page the incident commander on duty and the on-call engineer of the affected team
through PagerDuty; the commander decides whom else to pull in. For Sev2 the on-call engineer
leads and pages the commander only if the problem lasts more than an hour. Sev3 is handled in
working hours through the normal ticket queue.

## Communication

The communications lead posts a first notice on the public status page within 15 minutes of a
Sev1 being declared, and updates it at least every 30 minutes until resolution. Internal updates
go to the #incidents channel. Never name a customer on the status page, and never guess a cause
in public: say what is affected and when the next update will come.

## Closing an incident

The commander declares the incident resolved once metrics are back to normal for 30 minutes.
A blameless postmortem is written for every Sev1 and Sev2 and is due within five working days;
it lists the timeline, the impact, what went well, and action items with owners.

## Practising

Each team runs a game day every quarter, replaying a past incident on the staging cluster.

## Roles during an incident

- **Incident commander**: owns the incident, decides priorities, never debugs hands-on.
- **Operations lead**: the engineer investigating and changing systems; may pull in helpers.
- **Communications lead**: writes status page and customer updates, briefs support and sales.
- **Scribe**: keeps the timeline in the incident document (who did what, when).

For small incidents one person may hold several roles, but never commander and operations lead
at once during a Sev1.

## Customer communication

Account managers of affected Enterprise customers are told directly by phone within one hour of
a Sev1. Support uses the canned reply "incident-ongoing" and links to the status page instead of
answering one by one. Service credits owed under the SLA are computed by finance after the
postmortem, not promised during the incident.

## Tools

The incident bot creates a channel named after the incident number, a video bridge and the
incident document from a template. Use \`/incident declare\` in chat to start it, and
\`/incident resolve\` to close it. The bot also posts reminders when the status page has not been
updated for 25 minutes.

## On-call

On-call rotations are weekly, handing over on Monday at 10:00. On-call engineers get a fixed
allowance per week and time off in lieu for night pages that last more than an hour.
`;

const API_AUTHENTICATION = `# API authentication

Every request to the Halcyon Freight API is authenticated, either with an API key (server to
server) or with an OAuth 2.0 access token (apps acting for a user).

## API keys

Create keys in the dashboard under Settings › Developers. Send the key in the
\`X-Halcyon-Key\` header on every request; keys in query strings are rejected. A key belongs to
one account and carries the scopes chosen when it was made (\`shipments:read\`,
\`shipments:write\`, \`billing:read\`).

### Rotating keys

An account may hold two active keys at the same time, so a key can be replaced without
downtime: create the second key, deploy it to your servers, then revoke the first one.
Revoked keys stop working within one minute.

## OAuth 2.0

Apps use the authorization code flow with PKCE. Access tokens are valid for 60 minutes;
refresh tokens for 30 days, and each refresh returns a new refresh token (the old one is
invalidated). Tokens are bearer tokens in the \`Authorization\` header.

## Errors

A missing or unknown credential gives 401 \`unauthenticated\`; a valid credential without the
needed scope gives 403 \`forbidden\`. Repeated failures from one address are slowed down.

## Sandbox

The sandbox at \`sandbox.api.halcyonfreight.example\` accepts test keys (prefixed \`test_\`) only
and never books real shipments.

## Scopes

| Scope | Allows |
| --- | --- |
| \`shipments:read\` | list and fetch shipments, tracking events and labels |
| \`shipments:write\` | book, update and cancel shipments |
| \`billing:read\` | list invoices and credit notes |
| \`webhooks:manage\` | create and delete webhook endpoints |
| \`account:admin\` | manage users and keys of the account |

Ask for the narrowest scopes that work: a tracking widget needs only \`shipments:read\`.

## IP allow lists

Enterprise accounts can restrict each key to a list of IP ranges (CIDR notation). Requests from
other addresses are refused with 403 even when the key is valid. Allow lists apply to API keys
only; OAuth tokens follow the user's session rules.

## Service accounts

Integrations that run without a person (a warehouse system, an ERP connector) should use a
service account rather than a personal key, so the integration keeps working when an employee
leaves. Service accounts cannot sign in to the dashboard.

## Security recommendations

Store keys in a secret manager, never in source code or mobile apps. If a key leaks, revoke it
in the dashboard at once; the audit log shows every request made with it during the last 90
days.
`;

const API_WEBHOOKS = `# Webhooks

Webhooks tell your system about changes to shipments without polling.

## Events

| Event | When |
| --- | --- |
| \`shipment.created\` | a shipment is booked |
| \`shipment.picked_up\` | the carrier collected the parcel |
| \`shipment.in_transit\` | a hub scanned the parcel |
| \`shipment.delivered\` | the recipient received the parcel |
| \`shipment.exception\` | delivery failed or was delayed |

## Verifying signatures

Each delivery carries a \`Halcyon-Signature\` header: an HMAC-SHA256 of the raw request body,
keyed with your endpoint's signing secret, hex encoded, together with a timestamp. Compute the
same value and compare in constant time; reject deliveries whose timestamp is more than five
minutes old to stop replays.

## Retries

Answer with any 2xx status within ten seconds. Otherwise the delivery is retried with
exponential backoff, eight attempts over roughly 24 hours, after which the event is marked
failed and shown in the dashboard, where it can be resent by hand. Endpoints that fail for
three days in a row are disabled and the account owner is emailed.

## Ordering

Events can arrive out of order; use the \`occurred_at\` field and the shipment's version number
to discard stale ones.

## Managing endpoints

Create endpoints in the dashboard or with \`POST /v1/webhook-endpoints\`, choosing the events to
receive. Each account may have up to 20 endpoints. The signing secret is shown once when the
endpoint is created; roll it from the dashboard, and during the following 24 hours deliveries
are signed with both the old and the new secret.

## Payload

Every delivery is a JSON object with \`id\` (unique per event, use it to drop duplicates),
\`type\`, \`occurred_at\`, \`account_id\` and \`data\`, which holds the shipment as the API would
return it at that moment. Payloads never contain recipient phone numbers.

## Testing

The dashboard's "Send test event" button posts a sample of any event type to your endpoint. In
the sandbox, moving a test shipment through its states with \`POST /v1/sandbox/shipments/{id}/advance\`
fires the matching events.

## Troubleshooting

Deliveries time out most often because the endpoint does slow work before answering: store the
event and answer 200 at once, then process it in the background. The delivery log keeps the
response status and the first kilobyte of the body for 30 days.
`;

const RELEASE_PROCESS = `# Release process

We ship the platform once a week on a release train; this page explains the schedule and who
decides what.

## Schedule

- Monday and Tuesday: feature work merges to \`main\` behind flags.
- Code freeze starts on Wednesday at 12:00 CET: from then on only fixes for the release branch
  are merged, and each needs a reviewer from another team.
- Thursday: the release candidate is deployed to staging and the QA checklist runs.
- Friday before 11:00: production rollout, in three waves (5%, 50%, 100%) one hour apart.

## Roles

Each release has a release captain, rotating weekly among senior engineers. The captain cuts
the branch, chairs the go/no-go meeting on Thursday afternoon, and gives the final approval for
production; without the captain's approval nothing ships.

## Hotfixes

An urgent fix that cannot wait for the next train goes out as a hotfix: branch from the last
release tag, get two approvals, and deploy with the same three waves compressed to 15 minutes.
Every hotfix is merged back to \`main\` the same day.

## Rollback

If error rates rise during a wave, stop the rollout and redeploy the previous image. Database
migrations must be backwards compatible for one release so that a rollback never needs a
schema change.

## Release notes

Product managers write customer-facing release notes in the changelog tool by Thursday noon;
engineers add internal notes (migrations, new configuration, known issues) to the release
ticket. Notes are published when the third wave finishes.

## Feature flags

Unfinished features ship dark behind a flag. A flag is removed no later than two releases after
its feature reached 100%: stale flags are listed in the weekly engineering report and their
owners reminded.

## Mobile apps

The driver app (Android) follows its own schedule: a release every second Monday through the
store's staged rollout, starting at 10% of drivers. Backend changes must keep working with the
two previous app versions.

## Freeze periods

There are no releases between 15 December and 6 January, and none in the two weeks before
Black Friday, when shipment volumes peak. Only hotfixes go out in these periods.
`;

const PRODUCT_SYNC = `# Product sync, 5 October 2026

Attendees: Maya (product), Jonas (engineering), Priya (design), Tom (sales).

## Updates

- Tracking page redesign shipped to 20% of customers; bounce rate down 8%.
- The Android driver app release slipped a week because of map tile licensing.

## Carbon estimates

Customers keep asking how much CO2 a shipment produces. Decision: show an estimated CO2 figure
per shipment on the tracking page and in the API, computed from distance, vehicle type and load
factor, labelled as an estimate. Jonas to scope it; target is the November release.

## Bulk labels

Brightmart (our largest retail customer) asked for printing hundreds of labels in one go from
the dashboard. Agreed to build a bulk print action that produces one combined PDF; design by
Priya next sprint, shipping planned for mid-December.

## Pricing page

Tom wants annual prices on the pricing page. Postponed until finance confirms the discount.

## Action items

- Jonas: estimate effort for CO2 figures by 12 October.
- Priya: bulk label print mock-ups.
- Maya: write the release note for the tracking redesign.

## Customer feedback

Support summarised the top five requests of September: delivery time windows in the booking
flow, a Slovak translation of the tracking page, CSV export of invoices, address validation for
Italy, and the bulk labels mentioned above. Address validation for Italy is already in progress
with the routing team.

## Metrics

- Weekly active dashboard users: 4,310 (+6% month on month).
- Shipments booked through the API: 71% of all shipments.
- Net promoter score from the September survey: 41.

## Next sync

19 October, same time. Tom will bring the list of deals blocked by missing features.
`;

const OPS_REVIEW = `Operations review - 19 October 2026

Present: regional operations leads, customer support, fleet management.

1. Delivery performance
On-time delivery for September was 94.2%, below the 96% target. Most late deliveries were in
the Benelux region. Rotterdam was hit by a port strike from 22 to 26 September which held
containers at the terminal; inbound parcels for the Netherlands were delayed by two to four days.
Support handled 1,900 extra "where is my parcel" contacts during that week.

2. Fleet
Eleven of the diesel vans in Hamburg reach their replacement age next spring. Fleet management
proposes electric vans for city routes; a cost comparison is due at the next review.

3. Warehouse capacity
Warsaw is at 91% of its racking capacity. Overflow goes to Gdansk until the mezzanine extension
is finished in January.

4. Support
Average first response time on tickets is 3 hours 10 minutes; the goal is under 2 hours. Two
temporary agents start in November for the peak season.

Next review: 16 November 2026.

5. Safety
Two minor van accidents in September, no injuries. Both happened while reversing at customer
loading docks; fleet management will add reversing cameras to the remaining 30 vans without one
and repeat the dock safety briefing for all drivers.

6. Returns
Return volumes are up 18% since the returns portal launched. The Paris warehouse now processes
returns on a separate line in the afternoon to keep outbound picking on schedule.

7. Carrier performance
Nordlink missed its express target in Finland for the second month; the carrier manager will
raise it at the quarterly business review. AlpenTrans performed above target.

Action items
- Fleet: cost comparison diesel vs electric vans (owner: head of fleet).
- Warsaw: confirm mezzanine completion date with the contractor.
- Support: publish the peak season staffing plan.
`;

const ARCHITECTURE = `Architecture overview

The Halcyon Freight platform is a set of services written in TypeScript and Python, deployed on
Kubernetes in two regions (Frankfurt and Dublin).

Services
- shipment-api: the public REST API and dashboard backend. Stateless; scales on CPU.
- pricing: computes quotes from carrier rate cards and customer contracts.
- routing: plans delivery routes for our own fleet overnight (Python, OR-tools).
- tracking: consumes carrier scan events and updates shipment status.
- billing: produces monthly invoices and credit notes.

Communication
Services call each other over HTTP for queries and publish events on NATS JetStream for
everything that changes state (shipment booked, scan received, invoice issued). Consumers are
idempotent because JetStream delivers at least once.

Data
PostgreSQL 15 holds shipments, accounts and invoices (cluster pg-core, one primary and one
standby per region). Redis caches quotes for five minutes. Shipping labels, proofs of delivery
and invoice PDFs are kept in S3-compatible object storage, one bucket per region, with
lifecycle rules moving objects older than a year to cold storage.

Observability
Metrics go to Prometheus, logs to Loki, traces to Tempo. Every service exposes /healthz and
/readyz; alerts page the owning team.

Security
Traffic between services is encrypted with mutual TLS issued by the internal certificate
authority. Secrets live in Vault and are mounted at start; no secret is stored in Git.

Deployment
Each service is built into a container image by CI on every merge to main, scanned for known
vulnerabilities, and deployed by Argo CD from the environment repository. Staging mirrors
production at a smaller scale; preview environments are created per pull request for the
dashboard only.

Regions and failover
Customers are pinned to a home region by their account's country. Each region can take the
whole load of the other for a few hours; a regional failover is a manual decision of the
incident commander and follows the "region evacuation" runbook.

Performance targets
The public API answers 99% of requests within 300 ms. Quote computation is the slowest path
(up to 150 ms) because it loads the customer's contract; results are cached in Redis.

Batch jobs
Route planning runs at 22:00 for the next day. Invoicing runs on the first working day of the
month at 03:00. The data warehouse is refreshed hourly from a logical replica of pg-core.
`;

const RATE_LIMITS_HTML = `<!doctype html>
<html><head><title>Rate limits</title></head><body>
<h1>API rate limits</h1>
<p>Limits protect the platform from bursts and keep response times predictable for everyone.
They are counted per account, across all keys of the account.</p>
<h2>Limits by plan</h2>
<table>
<tr><th>Plan</th><th>Requests per minute</th><th>Burst</th></tr>
<tr><td>Starter</td><td>120</td><td>20</td></tr>
<tr><td>Growth</td><td>600</td><td>100</td></tr>
<tr><td>Enterprise</td><td>3000</td><td>500</td></tr>
</table>
<h2>Response headers</h2>
<p>Every response includes <code>X-RateLimit-Limit</code>, <code>X-RateLimit-Remaining</code> and
<code>X-RateLimit-Reset</code> (seconds until the window resets).</p>
<h2>Exceeding the limit</h2>
<p>Requests over the limit are answered with status 429 Too Many Requests and a
<code>Retry-After</code> header giving the number of seconds to wait. Clients should wait at least
that long, then retry with exponential backoff and jitter; clients that keep retrying immediately
are blocked for ten minutes.</p>
<h2>Higher limits</h2>
<p>Enterprise customers can ask their account manager for a higher limit for seasonal peaks.</p>
<h2>Endpoint-specific limits</h2>
<p>Some endpoints cost more than one request. Booking a shipment with a label counts as five
requests; downloading a label PDF counts as two; listing tracking events counts as one. Bulk
endpoints accept up to 100 items per call and count as twenty requests, so batching is always
cheaper than single calls.</p>
<h2>Concurrency</h2>
<p>Besides the per-minute limit, each account may have at most 25 requests in flight at the same
time. Extra concurrent requests wait for up to two seconds and are then refused with 429.</p>
<h2>Sandbox</h2>
<p>The sandbox has a flat limit of 60 requests per minute for every plan, so that load tests
belong in a staging environment of your own rather than in our sandbox.</p>
<h2>Monitoring your usage</h2>
<p>The dashboard's API usage page charts requests per minute and refused requests for the last
30 days, per key. An email alert can be configured for when an account reaches 80% of its
limit for more than five minutes.</p>
</body></html>
`;

const CUSTOMER_FAQ_HTML = `<!doctype html>
<html><head><title>Customer FAQ</title></head><body>
<h1>Frequently asked questions</h1>
<h2>Booking</h2>
<h3>Which countries do you deliver to?</h3>
<p>We deliver to all EU member states, Norway, Switzerland and the United Kingdom. Deliveries to
the Canary Islands, Ceuta and Melilla need a customs declaration and take two extra days.</p>
<h3>Can I change the delivery address?</h3>
<p>Yes, in the tracking page, as long as you do it before the parcel leaves our warehouse. After
dispatch, the carrier can only redirect it to a parcel locker near the original address.</p>
<h2>Problems</h2>
<h3>My parcel is lost</h3>
<p>A parcel counts as lost when there has been no scan for ten working days. Open a claim in the
dashboard; we refund the shipping price and reimburse the goods up to the declared value (or
EUR 500 without a declaration) within 14 days of the claim.</p>
<h3>My parcel arrived damaged</h3>
<p>Take photos of the box and contents and report it within 48 hours of delivery.</p>
<h2>Billing</h2>
<h3>When am I invoiced?</h3>
<p>Invoices are issued on the first working day of each month for the previous month's
shipments, payable within 30 days.</p>
<h2>Delivery</h2>
<h3>How long does delivery take?</h3>
<p>Standard parcels arrive within one to two working days inside Germany, Benelux and Austria,
and within two to four working days elsewhere in the EU. Express shipments booked before 16:00
arrive the next working day before noon.</p>
<h3>What happens if nobody is home?</h3>
<p>The driver tries a neighbour first, then leaves the parcel at the nearest parcel locker or
partner shop and sends a notice by email and SMS. Parcels are kept there for seven days before
they are returned to the sender.</p>
<h3>Can I choose a delivery time?</h3>
<p>In Berlin, Warsaw and Milan you can choose a two-hour evening window for a surcharge. Other
cities follow later.</p>
<h2>Account</h2>
<h3>How do I add colleagues?</h3>
<p>Account administrators invite users under Settings, Team. Each plan includes a number of
seats; further seats are billed monthly.</p>
<h3>How do I close my account?</h3>
<p>Write to support from the account owner's address. Open invoices must be paid first; your
shipment history stays available for download for 30 days after closing.</p>
</body></html>
`;

const ONBOARDING_HTML = `<!doctype html>
<html><head><title>Engineering onboarding</title></head><body>
<h1>Engineering onboarding checklist</h1>
<p>Welcome aboard! Work through this list with your manager.</p>
<h2>Before day one</h2>
<ul><li>IT ships your laptop; enrol it in device management when it arrives.</li>
<li>Accept the invitations to email, chat and the code host.</li></ul>
<h2>First week</h2>
<ul><li>Meet your onboarding buddy, who answers questions for your first month.</li>
<li>Set up the development environment with the bootstrap script and run the test suite.</li>
<li>Ship a small change to production with your buddy: a typo fix is fine.</li>
<li>Read the architecture overview and the incident response page.</li></ul>
<h2>First month</h2>
<ul><li>Shadow one on-call week before joining the rotation.</li>
<li>Request production access: the platform team grants it after the security training is done.</li>
<li>Agree on goals for your first three months with your manager.</li></ul>
<h2>Tools and accounts</h2>
<table>
<tr><th>Tool</th><th>What for</th><th>How to get it</th></tr>
<tr><td>Code host</td><td>Repositories, reviews, CI</td><td>Invitation on day one</td></tr>
<tr><td>PagerDuty</td><td>On-call paging</td><td>Added by your manager before your first shadow week</td></tr>
<tr><td>Vault</td><td>Secrets for local development</td><td>Request in the IT portal</td></tr>
<tr><td>Grafana</td><td>Dashboards and alerts</td><td>Single sign-on, no request needed</td></tr>
</table>
<h2>Learning</h2>
<p>Every engineer has a yearly learning budget for books, courses and one conference. Internal
tech talks take place every second Thursday at 16:00; recordings are in the wiki.</p>
<h2>Three-month check-in</h2>
<p>At the end of the third month you and your manager review the goals agreed in the first
month, and you give feedback on this onboarding so that we can improve it for the next hire.</p>
</body></html>
`;

const INVOICE_TS = `/**
 * Invoice computation for the billing service: line items, VAT per destination country and
 * rounding. Amounts are integer cents; rates are fractions.
 */
export interface LineItem {
  description: string;
  quantity: number;
  unitPriceCents: number;
}

/** VAT rate by destination country of the shipment (ISO 3166-1 alpha-2). */
export const VAT_RATES: Record<string, number> = {
  DE: 0.19,
  FR: 0.2,
  NL: 0.21,
  PL: 0.23,
  IT: 0.22,
  ES: 0.21,
};

/**
 * Rounds half to even ("banker's rounding") so that rounding errors do not pile up in one
 * direction over thousands of invoice lines, as finance requires.
 */
export function roundHalfEven(value: number): number {
  const floor = Math.floor(value);
  const diff = value - floor;
  if (diff > 0.5) return floor + 1;
  if (diff < 0.5) return floor;
  return floor % 2 === 0 ? floor : floor + 1;
}

export function invoiceTotal(items: LineItem[], country: string): { net: number; vat: number; gross: number } {
  const net = items.reduce((sum, item) => sum + item.quantity * item.unitPriceCents, 0);
  const rate = VAT_RATES[country] ?? 0; // outside the EU: no VAT, reverse charge applies
  const vat = roundHalfEven(net * rate);
  return { net, vat, gross: net + vat };
}

/** Credit notes reuse the invoice number with a "-C" suffix and negative amounts. */
export function creditNoteNumber(invoiceNumber: string): string {
  return \`\${invoiceNumber}-C\`;
}

/** Payment terms by plan, in days after the invoice date. */
export const PAYMENT_TERMS_DAYS: Record<string, number> = { starter: 14, growth: 30, enterprise: 45 };

/** A late payment fee applies after the due date plus a grace period of 5 days. */
export function lateFeeCents(grossCents: number, daysLate: number): number {
  if (daysLate <= 5) return 0;
  // 1% per started month late, at least EUR 5.
  const months = Math.ceil((daysLate - 5) / 30);
  return Math.max(500, roundHalfEven(grossCents * 0.01 * months));
}

/** Invoice numbers: HF-<year>-<six-digit sequence>, restarting every January. */
export function invoiceNumber(year: number, sequence: number): string {
  return \`HF-\${year}-\${String(sequence).padStart(6, '0')}\`;
}

/**
 * Shipments to customers outside the EU are invoiced without VAT (export), and customers inside
 * the EU with a valid VAT ID in another country than ours are invoiced with reverse charge.
 */
export function isReverseCharge(customerCountry: string, hasVatId: boolean): boolean {
  return customerCountry !== 'DE' && hasVatId && customerCountry in VAT_RATES;
}
`;

const ROUTE_OPTIMIZER_PY = `"""Nightly route planning for the own fleet.

Builds one route per van from the next day's deliveries, respecting vehicle capacity, delivery
time windows and the drivers' legal driving time.
"""
from dataclasses import dataclass

# A route never has more stops than this: drivers cannot finish more in one shift.
MAX_STOPS_PER_ROUTE = 120

# EU rules: a break of 45 minutes after at most 4.5 hours (270 minutes) of driving.
MAX_DRIVING_MINUTES_BEFORE_BREAK = 270
BREAK_MINUTES = 45

# Service time per stop, in minutes, by parcel size.
SERVICE_MINUTES = {"small": 2, "medium": 4, "large": 8, "pallet": 15}


@dataclass
class Stop:
    address: str
    earliest: int  # minutes after midnight
    latest: int
    size: str
    weight_kg: float


@dataclass
class Van:
    plate: str
    capacity_kg: float
    depot: str


def route_fits(van: Van, stops: list[Stop]) -> bool:
    """True when the stops fit the van by count and by weight."""
    if len(stops) > MAX_STOPS_PER_ROUTE:
        return False
    return sum(stop.weight_kg for stop in stops) <= van.capacity_kg


def needs_break(driving_minutes: int) -> bool:
    return driving_minutes >= MAX_DRIVING_MINUTES_BEFORE_BREAK


def service_minutes(stops: list[Stop]) -> int:
    """Time spent at the doors of a route, by parcel size."""
    return sum(SERVICE_MINUTES[stop.size] for stop in stops)


def insert_breaks(legs: list[int]) -> list[int]:
    """Given driving minutes per leg, returns the legs after which a break is taken."""
    breaks = []
    driving = 0
    for index, minutes in enumerate(legs):
        driving += minutes
        if needs_break(driving):
            breaks.append(index)
            driving = 0
    return breaks


def violates_window(stop: Stop, arrival: int) -> bool:
    """Arriving early is fine (the driver waits); arriving after the window closes is not."""
    return arrival > stop.latest


# Vans leave the depot no earlier than 07:00 and must be back by 19:00.
SHIFT_START = 7 * 60
SHIFT_END = 19 * 60

# Electric vans: plan a charging stop when the remaining range falls under 40 km.
MIN_RANGE_KM = 40
`;

const FEATURE_FLAGS = {
  flags: [
    {
      key: 'new_checkout',
      description: 'Redesigned booking checkout with saved addresses',
      enabled: true,
      rollout: { percentage: 50, excludeAccounts: ['brightmart'] },
      owner: 'web-team',
    },
    {
      key: 'same_day_slots',
      description: 'Offer same-day delivery time slots in Berlin, Warsaw and Milan',
      enabled: false,
      rollout: { percentage: 0, cities: ['BER', 'WAW', 'MIL'] },
      owner: 'routing-team',
    },
    {
      key: 'co2_estimates',
      description: 'Show estimated CO2 per shipment on the tracking page',
      enabled: false,
      rollout: { percentage: 0 },
      owner: 'tracking-team',
    },
    {
      key: 'invoice_pdf_v2',
      description: 'New invoice PDF layout with QR payment code',
      enabled: true,
      rollout: { percentage: 100 },
      owner: 'billing-team',
    },
  ],
  updatedAt: '2026-10-20T08:00:00Z',
};

const WAREHOUSE_ROWS: Array<Array<string | number>> = [
  ['Code', 'City', 'Country', 'Manager', 'Opening hours', 'Capacity (pallets)', 'Cold storage'],
  ['BER-1', 'Berlin', 'Germany', 'Katrin Vogel', 'Mon-Sat 06:00-22:00', 14000, 'no'],
  ['HAM-1', 'Hamburg', 'Germany', 'Ole Petersen', 'Mon-Fri 05:00-21:00', 18000, 'yes'],
  ['WAW-1', 'Warsaw', 'Poland', 'Marta Kowalczyk', 'Mon-Sat 06:00-20:00', 12000, 'no'],
  ['GDN-1', 'Gdansk', 'Poland', 'Piotr Nowak', 'Mon-Fri 07:00-19:00', 6000, 'no'],
  ['LYS-1', 'Lyon', 'France', 'Claire Dubois', 'Mon-Fri 06:00-21:00', 9000, 'no'],
  ['PAR-2', 'Paris', 'France', 'Julien Martin', 'Mon-Sun 00:00-24:00', 21000, 'yes'],
  ['MIL-1', 'Milan', 'Italy', 'Giulia Ferri', 'Mon-Sat 06:00-22:00', 11000, 'yes'],
  ['MAD-1', 'Madrid', 'Spain', 'Lucia Romero', 'Mon-Fri 06:00-20:00', 10000, 'no'],
  ['RTM-1', 'Rotterdam', 'Netherlands', 'Sanne de Vries', 'Mon-Sun 00:00-24:00', 25000, 'yes'],
  ['PRG-1', 'Prague', 'Czechia', 'Tomas Dvorak', 'Mon-Fri 06:00-18:00', 5000, 'no'],
  ['VIE-1', 'Vienna', 'Austria', 'Lena Huber', 'Mon-Fri 06:00-20:00', 7000, 'no'],
  ['CPH-1', 'Copenhagen', 'Denmark', 'Mads Larsen', 'Mon-Fri 07:00-19:00', 4000, 'no'],
  ['LIS-1', 'Lisbon', 'Portugal', 'Rui Almeida', 'Mon-Fri 07:00-19:00', 4500, 'no'],
  ['DUB-1', 'Dublin', 'Ireland', 'Aoife Byrne', 'Mon-Fri 07:00-19:00', 3500, 'no'],
  ['BRU-1', 'Brussels', 'Belgium', 'Pieter Janssens', 'Mon-Sat 06:00-20:00', 8000, 'yes'],
  ['ZRH-1', 'Zurich', 'Switzerland', 'Nina Keller', 'Mon-Fri 06:00-19:00', 3000, 'no'],
  ['LEJ-1', 'Leipzig', 'Germany', 'Franziska Lang', 'Mon-Sat 05:00-22:00', 16000, 'no'],
  ['MUC-1', 'Munich', 'Germany', 'Stefan Bauer', 'Mon-Fri 06:00-20:00', 9500, 'yes'],
  ['CGN-1', 'Cologne', 'Germany', 'Jan Schneider', 'Mon-Fri 06:00-21:00', 11500, 'no'],
  ['STR-1', 'Stuttgart', 'Germany', 'Melanie Wolf', 'Mon-Fri 06:00-19:00', 6500, 'no'],
  ['FRA-1', 'Frankfurt', 'Germany', 'Deniz Yilmaz', 'Mon-Sun 00:00-24:00', 19000, 'yes'],
  ['KRK-1', 'Krakow', 'Poland', 'Agnieszka Wisniewska', 'Mon-Fri 06:00-20:00', 7000, 'no'],
  ['WRO-1', 'Wroclaw', 'Poland', 'Kamil Zielinski', 'Mon-Sat 06:00-22:00', 13000, 'no'],
  ['POZ-1', 'Poznan', 'Poland', 'Ewa Lewandowska', 'Mon-Fri 07:00-19:00', 8000, 'no'],
  ['MRS-1', 'Marseille', 'France', 'Antoine Roux', 'Mon-Fri 06:00-20:00', 7500, 'yes'],
  ['LIL-1', 'Lille', 'France', 'Camille Lefebvre', 'Mon-Sat 05:00-21:00', 10500, 'no'],
  ['TLS-1', 'Toulouse', 'France', 'Mathieu Girard', 'Mon-Fri 06:00-19:00', 5500, 'no'],
  ['TRN-1', 'Turin', 'Italy', 'Marco Rinaldi', 'Mon-Fri 06:00-20:00', 6000, 'no'],
  ['ROM-1', 'Rome', 'Italy', 'Francesca Conti', 'Mon-Sat 06:00-21:00', 8500, 'no'],
  ['BLQ-1', 'Bologna', 'Italy', 'Davide Greco', 'Mon-Fri 06:00-20:00', 9000, 'no'],
  ['BCN-1', 'Barcelona', 'Spain', 'Jordi Puig', 'Mon-Sat 06:00-22:00', 12500, 'yes'],
  ['VLC-1', 'Valencia', 'Spain', 'Carmen Navarro', 'Mon-Fri 07:00-19:00', 5000, 'no'],
  ['OPO-1', 'Porto', 'Portugal', 'Ines Sousa', 'Mon-Fri 07:00-19:00', 3000, 'no'],
  ['ANR-1', 'Antwerp', 'Belgium', 'Wouter Peeters', 'Mon-Sun 00:00-24:00', 17000, 'yes'],
  ['UTC-1', 'Utrecht', 'Netherlands', 'Bram Visser', 'Mon-Sat 06:00-22:00', 9000, 'no'],
  ['GRZ-1', 'Graz', 'Austria', 'Florian Gruber', 'Mon-Fri 06:00-18:00', 3500, 'no'],
  ['BRQ-1', 'Brno', 'Czechia', 'Petra Novotna', 'Mon-Fri 06:00-18:00', 4000, 'no'],
  ['AAR-1', 'Aarhus', 'Denmark', 'Freja Nielsen', 'Mon-Fri 07:00-18:00', 2500, 'no'],
  ['GVA-1', 'Geneva', 'Switzerland', 'Luca Rossi', 'Mon-Fri 07:00-18:00', 2000, 'no'],
];

const CARRIER_ROWS: Array<Array<string | number>> = [
  ['Carrier', 'Service', 'Countries', 'On-time SLA', 'Price per kg (EUR)', 'Max weight (kg)', 'Notes'],
  ['Nordlink', 'Express parcel', 'Denmark; Sweden; Norway; Finland', '97.5%', 1.8, 31, 'Saturday delivery'],
  ['Nordlink', 'Economy parcel', 'Denmark; Sweden; Norway; Finland', '93%', 0.9, 31, ''],
  ['Iberia Cargo', 'Pallet freight', 'Spain; Portugal', '95%', 0.35, 1200, 'Tail-lift on request'],
  ['Iberia Cargo', 'Parcel', 'Spain; Portugal', '94%', 1.1, 30, ''],
  [
    'AlpenTrans',
    'Pallet freight',
    'Austria; Switzerland; Italy',
    '96%',
    0.42,
    1000,
    'Customs handled for CH',
  ],
  ['Baltic Road', 'Groupage', 'Poland; Lithuania; Latvia; Estonia', '92%', 0.3, 2400, ''],
  ['Eurovan', 'Same-day courier', 'Germany; Netherlands; Belgium', '98%', 3.2, 20, 'City centres only'],
  ['Eurovan', 'Next-day parcel', 'Germany; Netherlands; Belgium; Luxembourg', '96.5%', 1.2, 31, ''],
  ['Gallia Express', 'Parcel', 'France; Monaco', '95.5%', 1.15, 30, 'Relay points'],
  ['Celtic Freight', 'Parcel', 'Ireland; United Kingdom', '93.5%', 1.6, 30, 'Customs for UK'],
  ['Danubia Logistics', 'Pallet freight', 'Hungary; Slovakia; Czechia; Austria', '94%', 0.38, 1000, ''],
  ['Danubia Logistics', 'Parcel', 'Hungary; Slovakia', '93%', 1.05, 30, 'No Saturday service'],
  [
    'Hanse Cargo',
    'Full truck load',
    'Germany; Poland; Netherlands',
    '97%',
    0.12,
    24000,
    'Booking 48 h ahead',
  ],
  ['Hanse Cargo', 'Part load', 'Germany; Poland; Czechia', '95%', 0.22, 8000, ''],
  ['Adriatica', 'Parcel', 'Italy; Slovenia; Croatia', '92.5%', 1.25, 30, 'Islands +2 days'],
  ['Adriatica', 'Pallet freight', 'Italy; Slovenia', '94.5%', 0.4, 1000, ''],
  ['Benelux Direct', 'Evening delivery', 'Netherlands; Belgium', '96%', 2.1, 25, '18:00-22:00 window'],
  ['Polar Post', 'Parcel', 'Norway; Iceland', '91%', 2.4, 30, 'Customs for non-EU'],
];

const SLA_CREDIT_ROWS: Array<Array<string | number>> = [
  ['Plan', 'Metric', 'Threshold', 'Service credit (% of monthly fee)', 'Claim within'],
  ['Starter', 'Monthly API availability', 'below 99.0%', '5%', '30 days'],
  ['Starter', 'Monthly API availability', 'below 97.0%', '10%', '30 days'],
  ['Growth', 'Monthly API availability', 'below 99.5%', '10%', '30 days'],
  ['Growth', 'Monthly API availability', 'below 99.0%', '15%', '30 days'],
  ['Growth', 'Monthly API availability', 'below 97.0%', '25%', '30 days'],
  ['Enterprise', 'Monthly API availability', 'below 99.9%', '10%', '60 days'],
  ['Enterprise', 'Monthly API availability', 'below 99.5%', '25%', '60 days'],
  ['Enterprise', 'Monthly API availability', 'below 99.0%', '50%', '60 days'],
  ['Starter', 'First support response', 'over 2 working days', 'none', '-'],
  ['Growth', 'First support response', 'over 8 working hours', '5%', '30 days'],
  ['Enterprise', 'First support response (priority 1)', 'over 1 hour', '10%', '60 days'],
  ['Enterprise', 'First support response (priority 2)', 'over 4 hours', '5%', '60 days'],
  ['Growth', 'Label generation latency p95', 'over 2 seconds for a day', '2%', '30 days'],
  ['Enterprise', 'Label generation latency p95', 'over 1 second for a day', '5%', '60 days'],
  ['Enterprise', 'Tracking event delay', 'over 15 minutes for a day', '3%', '60 days'],
  ['All plans', 'Maximum credit per month', '-', '50%', '-'],
];

const REMOTE_WORK_PAGES = [
  `Remote work policy. Version 3, effective 1 March 2026. Owner: People team.
Halcyon Freight is a hybrid company. Most roles can be done from home for part or all of the week; roles in warehouses, the fleet and customer pickup counters cannot, and are not covered by this policy.
Who may work remotely: every employee in an office-based role after passing probation, with the agreement of their manager. Managers may only refuse for reasons written in the role description.`,
  `Equipment and home office. The company provides a laptop, a monitor, a headset and a keyboard. In addition, each remote employee receives a one-time home office allowance of EUR 600 for a desk, a chair or lighting, paid with the next salary after the receipts are submitted. Internet costs are reimbursed up to EUR 30 per month.
Health and safety: keep your workspace ergonomic; the People team offers a video check of your setup on request.`,
  `Working hours and availability. Remote staff keep the same contract hours as in the office. Everyone must be reachable on chat and phone during core hours, between 10:00 and 15:00 local time; outside core hours, people organise their day freely.
Working from abroad. You may work from another country for up to 30 days per calendar year, provided it is in the EU or a country with a data protection adequacy decision. Longer stays need approval from the People team because of tax and social security rules.`,
  `Security when working remotely. Work only on company devices, and use the VPN for internal systems. Do not work on confidential data in public places such as trains or cafes where others can read your screen, and lock your laptop whenever you step away. Printing confidential documents at home is not allowed.
Meetings. Cameras are encouraged but not required. Meetings that include remote participants are run as if everyone were remote: every participant joins from their own device, even from the office.`,
  `Coming to the office. Teams agree on one shared office day per week so that people meet in person. Travel to the office is paid by the employee, except for people hired as fully remote, who are reimbursed for up to four trips per year to their team's office.
Ending remote work. The company may ask an employee to return to the office with three months notice when the needs of the role change; the employee may end their remote arrangement with one month notice.
Questions about this policy go to the People team.`,
];

const HANDBOOK_PAGES = [
  `Employee handbook. Welcome to Halcyon Freight. This handbook explains how we work together: contracts, time off, benefits and conduct. Where a local law or collective agreement gives more, it applies instead.
Contracts and probation. New employees start with a probation period of six months, during which either side may end the contract with two weeks notice. Your manager holds a review at three months and at the end of probation.`,
  `Time off. Full-time employees have 28 days of paid vacation per calendar year, plus public holidays of their work location. Up to five unused days may be carried over to the next year and must be taken by 31 March. Sick leave: tell your manager before 10:00 on the first day; from the fourth day a doctor's note is required.
Parental leave. Birth parents and partners both receive 16 weeks of fully paid parental leave, to be taken within the child's first two years, in up to three blocks.`,
  `Benefits. Everyone receives a public transport pass or a bike leasing contract, a yearly learning budget of EUR 1,000 and a contribution to a company pension plan of 4% of salary.
Conduct. We treat colleagues, customers and drivers with respect. Harassment or discrimination is never tolerated; report it to your manager, the People team, or the anonymous whistleblowing line.`,
  `Leaving the company. The notice period after probation is one month for the first two years and three months afterwards. Return your equipment on your last day; IT wipes the devices. You receive a written reference on request.`,
  `Working time. The standard working week is 40 hours, Monday to Friday, with flexible start times between 07:00 and 10:00. Overtime must be agreed with your manager in advance and is compensated with time off; warehouse and fleet staff are paid overtime under their collective agreement.
Public holidays that fall on a weekend are not replaced by another day off.`,
  `Pay. Salaries are paid on the last working day of each month. Salary bands are published internally for every role and level, and salaries are reviewed once a year in April. Promotions can happen at any time of year.
Bonus. There is no individual bonus; instead, a company profit share is paid in June to everyone employed for the whole previous year, in equal amounts for all employees.`,
  `Health. Employees have access to an employee assistance programme with free, confidential counselling. A yearly health check is offered to everyone over 35, and eye tests are paid for people working with screens.
Company events. The whole company meets once a year for two days in summer; each team also has a budget for one team event per quarter.`,
];

const EXPENSE_POLICY = [
  {
    heading: 'Travel and expense policy',
    paragraphs: [
      'This policy covers travel booked for work and the costs employees pay themselves and claim back. It applies to all employees and to contractors whose contract refers to it.',
    ],
  },
  {
    heading: 'Booking travel',
    level: 2 as const,
    paragraphs: [
      'Book trips through the travel portal at least 14 days ahead when possible. Trains are preferred to flights for journeys under four hours.',
      'Flights are booked in economy class. Business class is allowed only when the flight itself lasts more than eight hours, or with written approval of a director.',
      'Hotels up to EUR 150 per night (EUR 220 in London, Paris and Zurich) can be booked without approval.',
    ],
  },
  {
    heading: 'Meals and per diem',
    level: 2 as const,
    paragraphs: [
      'On business trips you receive a daily allowance of EUR 45 for meals, or EUR 20 on days when a meal is provided by a customer or a conference. Alcohol is not reimbursed.',
    ],
  },
  {
    heading: 'Claiming expenses',
    level: 2 as const,
    paragraphs: [
      'Submit each expense in the finance app with a photo of the receipt within 30 days of the purchase; later claims are refused except for a documented reason. Claims are paid with the next salary.',
      'Company cards may be used only for business costs; private purchases are deducted from salary.',
    ],
  },
  {
    heading: 'Approval limits',
    level: 1 as const,
    table: [
      ['Amount', 'Approver'],
      ['Up to EUR 500', 'Manager'],
      ['EUR 500 to 5,000', 'Department head'],
      ['Above EUR 5,000', 'Chief financial officer'],
    ],
  },
  {
    heading: 'Ground transport',
    level: 2 as const,
    paragraphs: [
      'Use public transport where it is practical. Taxis and ride-hailing are fine late at night, with heavy luggage, or when public transport would take more than twice as long.',
      'Private cars used for business trips are reimbursed at EUR 0.30 per kilometre; parking and tolls are reimbursed separately with receipts. Rental cars are booked in the compact category.',
    ],
  },
  {
    heading: 'Customer entertainment',
    level: 2 as const,
    paragraphs: [
      'Business meals with customers are reimbursed up to EUR 80 per person including the customer. Write the names of all participants and the purpose of the meeting on the claim.',
      'Gifts to customers must not exceed EUR 50 per person and year, and are never given to public officials.',
    ],
  },
  {
    heading: 'Not reimbursed',
    level: 2 as const,
    paragraphs: [
      'Fines, minibar items, personal entertainment, upgrades paid for convenience, lost luggage without a claim to the airline, and the costs of family members travelling along.',
    ],
  },
];

const SECURITY_POLICY = [
  {
    heading: 'Information security policy',
    paragraphs: [
      'Security is everybody\u2019s job. This policy sets the minimum rules for accounts, devices and data at Halcyon Freight. Breaking them may lead to disciplinary action.',
    ],
  },
  {
    heading: 'Accounts and passwords',
    level: 2 as const,
    paragraphs: [
      'Use the company password manager and a different password of at least 14 characters for every account. Passwords are not changed on a schedule; change one at once after any suspected compromise.',
      'Multi-factor sign-in is mandatory for every company account. Administrators and engineers with production access must use a hardware key; everybody else may use the authenticator app.',
    ],
  },
  {
    heading: 'Devices',
    level: 2 as const,
    paragraphs: [
      'Laptops are encrypted, enrolled in device management and lock after five minutes. Private devices may be used for email and chat only, through the managed apps.',
    ],
  },
  {
    heading: 'Reporting',
    level: 2 as const,
    paragraphs: [
      'Forward suspicious emails, such as phishing attempts, to security@halcyonfreight.example with the report button in the mail client, then delete them. Report lost devices within one hour to the IT service desk.',
    ],
  },
  {
    heading: 'Data classification',
    level: 1 as const,
    table: [
      ['Class', 'Examples', 'Handling'],
      ['Public', 'Price list, blog posts', 'No restriction'],
      ['Internal', 'Runbooks, meeting notes', 'Employees only'],
      ['Confidential', 'Customer shipments, invoices', 'Need to know, encrypted at rest'],
    ],
  },
  {
    heading: 'Access control',
    level: 2 as const,
    paragraphs: [
      'Access is granted by role and reviewed every quarter by each manager. Production access is time-limited: engineers request it for a task and it expires after eight hours.',
      'When someone leaves the company, all their accounts are disabled on their last working day by the IT service desk, triggered by the People system.',
    ],
  },
  {
    heading: 'Software',
    level: 2 as const,
    paragraphs: [
      'Install software only from the company software catalogue. Browser extensions need approval from IT, because they can read everything shown in the browser.',
      'Operating system updates are installed within 14 days of release; devices that are more than 30 days behind lose access to company systems until they are updated.',
    ],
  },
  {
    heading: 'Working with suppliers',
    level: 2 as const,
    paragraphs: [
      'Suppliers that process customer data sign a data processing agreement and complete the security questionnaire before they receive any data. The security team reviews critical suppliers once a year.',
    ],
  },
];

const DATA_RETENTION = [
  {
    heading: 'Data retention schedule',
    paragraphs: [
      'We keep personal and business data only as long as the law or a clear business need requires. After the periods below, data is deleted or anonymised automatically.',
    ],
  },
  {
    heading: 'Customer data',
    level: 2 as const,
    paragraphs: [
      'Shipment records, invoices and credit notes are kept for seven years after the end of the financial year, as commercial and tax law requires.',
      'Recipient phone numbers and delivery instructions are removed 60 days after delivery.',
    ],
  },
  {
    heading: 'Employee and driver data',
    level: 2 as const,
    paragraphs: [
      'GPS positions recorded by the driver app are deleted after 90 days, unless they are needed to investigate a specific claim or accident.',
      'Application documents of rejected candidates are deleted six months after the decision.',
    ],
  },
  {
    heading: 'Logs and backups',
    level: 2 as const,
    paragraphs: [
      'Application logs are kept for 30 days and security audit logs for one year. Database backups are retained for 35 days.',
    ],
  },
  {
    heading: 'Deletion requests',
    level: 2 as const,
    paragraphs: [
      'A person may ask us to delete their personal data. Requests are answered within one month by the data protection officer. Data we must keep by law (for example on invoices) is restricted instead of deleted until the retention period ends.',
    ],
  },
  {
    heading: 'Retention periods at a glance',
    level: 1 as const,
    table: [
      ['Data', 'Kept for', 'Then'],
      ['Shipment records and invoices', '7 years after year end', 'Deleted'],
      ['Recipient phone numbers', '60 days after delivery', 'Deleted'],
      ['Driver GPS positions', '90 days', 'Deleted'],
      ['Proof of delivery photos', '1 year', 'Deleted'],
      ['Support tickets', '3 years after closing', 'Anonymised'],
      ['Marketing consent records', 'As long as consent lasts plus 3 years', 'Deleted'],
      ['CCTV footage in warehouses', '72 hours', 'Overwritten'],
    ],
  },
  {
    heading: 'Responsibilities',
    level: 2 as const,
    paragraphs: [
      'Each system owner makes sure the automatic deletion jobs of their system run, and checks the deletion report every quarter. The data protection officer audits two systems per quarter.',
    ],
  },
];

const PRICE_LIST = [
  {
    name: 'Plans',
    rows: [
      ['Plan', 'Monthly fee (EUR)', 'Shipments included', 'Extra shipment (EUR)', 'Support'],
      ['Starter', 49, 200, 0.6, 'Email'],
      ['Growth', 249, 2000, 0.45, 'Email and chat'],
      ['Enterprise', 1490, 20000, 0.3, 'Dedicated manager'],
    ],
  },
  {
    name: 'Add-ons',
    rows: [
      ['Add-on', 'Price (EUR)', 'Unit'],
      ['Parcel insurance', 1.9, 'per parcel, up to EUR 2,500 value'],
      ['Saturday delivery', 4.5, 'per parcel'],
      ['Proof of delivery with photo', 0.2, 'per parcel'],
      ['Returns portal', 99, 'per month'],
      ['Additional user seat', 12, 'per month'],
    ],
  },
  {
    name: 'Volume discounts',
    rows: [
      ['Shipments per month from', 'Discount on extra shipments'],
      [5000, '5%'],
      [10000, '12%'],
      [50000, '20%'],
    ],
  },
  {
    name: 'Zone surcharges',
    rows: [
      ['Destination zone', 'Countries', 'Surcharge per parcel (EUR)', 'Transit days'],
      ['Zone 1', 'Germany', 0, '1-2'],
      ['Zone 2', 'Austria; Belgium; Netherlands; Luxembourg; Denmark', 1.2, '1-3'],
      ['Zone 3', 'France; Poland; Czechia; Italy', 2.1, '2-3'],
      ['Zone 4', 'Spain; Portugal; Sweden; Finland; Ireland', 3.4, '2-4'],
      ['Zone 5', 'Greece; Romania; Bulgaria; Baltic states', 4.9, '3-5'],
      ['Zone 6', 'Norway; Switzerland; United Kingdom (customs)', 7.5, '3-6'],
      ['Islands', 'Canary Islands; Balearics; Sardinia; Corsica', 9.0, '4-7'],
    ],
  },
  {
    name: 'Weight bands',
    rows: [
      ['Weight up to (kg)', 'Base price Zone 1 (EUR)', 'Base price Zone 3 (EUR)', 'Base price Zone 5 (EUR)'],
      [1, 4.2, 6.3, 9.1],
      [2, 4.9, 7.1, 10.2],
      [5, 6.1, 8.8, 12.6],
      [10, 8.4, 11.9, 16.8],
      [20, 12.7, 17.5, 24.9],
      [31.5, 17.9, 24.2, 33.8],
    ],
  },
];

const BUDGET = [
  {
    name: '2027 by department',
    rows: [
      ['Department', 'Personnel (EUR)', 'Operating (EUR)', 'Capital (EUR)', 'Total (EUR)', 'Owner'],
      ['Engineering', 6200000, 900000, 150000, 7250000, 'CTO'],
      ['Operations', 9800000, 4100000, 300000, 14200000, 'COO'],
      ['Fleet', 3100000, 2600000, 4800000, 10500000, 'Head of fleet'],
      ['Marketing', 1200000, 1850000, 0, 3050000, 'CMO'],
      ['Sales', 2700000, 450000, 0, 3150000, 'CRO'],
      ['Customer support', 1900000, 200000, 0, 2100000, 'Head of support'],
      ['Finance and legal', 1300000, 350000, 0, 1650000, 'CFO'],
    ],
  },
  {
    name: 'Capital projects',
    rows: [
      ['Project', 'Department', 'Amount (EUR)', 'Quarter'],
      ['Electric vans for city routes (40 vehicles)', 'Fleet', 3600000, 'Q2'],
      ['Replacement trucks for long haul (8 vehicles)', 'Fleet', 1200000, 'Q3'],
      ['Warsaw mezzanine extension', 'Operations', 300000, 'Q1'],
      ['Staging cluster hardware', 'Engineering', 150000, 'Q1'],
    ],
  },
  {
    name: 'Monthly forecast',
    rows: [
      ['Month', 'Shipments forecast', 'Revenue forecast (EUR)', 'Operating cost forecast (EUR)', 'Comment'],
      ['January', 1305000, 4045500, 3393000, 'After-Christmas returns'],
      ['February', 1276000, 3955600, 3317600, ''],
      ['March', 1377500, 4270250, 3581500, ''],
      ['April', 1406500, 4360150, 3656900, 'Easter'],
      ['May', 1450000, 4495000, 3770000, ''],
      ['June', 1450000, 4495000, 3770000, ''],
      ['July', 1392000, 4315200, 3619200, ''],
      ['August', 1363000, 4225300, 3543800, 'Summer holidays in southern Europe'],
      ['September', 1479000, 4584900, 3845400, ''],
      ['October', 1537000, 4764700, 3996200, ''],
      ['November', 1812500, 5618750, 4712500, 'Peak season: Black Friday and Christmas'],
      ['December', 1551500, 4809650, 4033900, ''],
    ],
  },
  {
    name: 'Headcount',
    rows: [
      ['Department', 'End of 2026', 'Planned end of 2027', 'Open roles'],
      ['Engineering', 58, 66, 'Backend (4), data (2), mobile (2)'],
      ['Operations', 410, 445, 'Warehouse leads, pickers for Warsaw and Leipzig'],
      ['Fleet', 160, 175, 'Drivers for electric van routes'],
      ['Marketing', 14, 16, 'Content, performance marketing'],
      ['Sales', 31, 36, 'Account executives for Italy and Spain'],
      ['Customer support', 48, 52, 'Peak season agents'],
      ['Finance and legal', 17, 18, 'Data protection counsel'],
    ],
  },
];
