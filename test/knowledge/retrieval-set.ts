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
  q('How are invoice totals rounded?', 'src/billing/invoice.ts', 'half-even'),
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
  q('Can I work from another country for a few weeks?', 'policies/remote-work-policy.pdf', '30 days'),
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
];

const SLA_CREDIT_ROWS: Array<Array<string | number>> = [
  ['Plan', 'Monthly availability below', 'Service credit (% of monthly fee)'],
  ['Starter', '99.0%', '5%'],
  ['Starter', '97.0%', '10%'],
  ['Growth', '99.5%', '10%'],
  ['Growth', '99.0%', '15%'],
  ['Growth', '97.0%', '25%'],
  ['Enterprise', '99.9%', '10%'],
  ['Enterprise', '99.5%', '25%'],
  ['Enterprise', '99.0%', '50%'],
];

const REMOTE_WORK_PAGES = [
  `Remote work policy. Version 3, effective 1 March 2026. Owner: People team.
Halcyon Freight is a hybrid company. Most roles can be done from home for part or all of the week; roles in warehouses, the fleet and customer pickup counters cannot, and are not covered by this policy.
Who may work remotely: every employee in an office-based role after passing probation, with the agreement of their manager. Managers may only refuse for reasons written in the role description.`,
  `Equipment and home office. The company provides a laptop, a monitor, a headset and a keyboard. In addition, each remote employee receives a one-time home office allowance of EUR 600 for a desk, a chair or lighting, paid with the next salary after the receipts are submitted. Internet costs are reimbursed up to EUR 30 per month.
Health and safety: keep your workspace ergonomic; the People team offers a video check of your setup on request.`,
  `Working hours and availability. Remote staff keep the same contract hours as in the office. Everyone must be reachable on chat and phone during core hours, between 10:00 and 15:00 local time; outside core hours, people organise their day freely.
Working from abroad. You may work from another country for up to 30 days per calendar year, provided it is in the EU or a country with a data protection adequacy decision. Longer stays need approval from the People team because of tax and social security rules.`,
];

const HANDBOOK_PAGES = [
  `Employee handbook. Welcome to Halcyon Freight. This handbook explains how we work together: contracts, time off, benefits and conduct. Where a local law or collective agreement gives more, it applies instead.
Contracts and probation. New employees start with a probation period of six months, during which either side may end the contract with two weeks notice. Your manager holds a review at three months and at the end of probation.`,
  `Time off. Full-time employees have 28 days of paid vacation per calendar year, plus public holidays of their work location. Up to five unused days may be carried over to the next year and must be taken by 31 March. Sick leave: tell your manager before 10:00 on the first day; from the fourth day a doctor's note is required.
Parental leave. Birth parents and partners both receive 16 weeks of fully paid parental leave, to be taken within the child's first two years, in up to three blocks.`,
  `Benefits. Everyone receives a public transport pass or a bike leasing contract, a yearly learning budget of EUR 1,000 and a contribution to a company pension plan of 4% of salary.
Conduct. We treat colleagues, customers and drivers with respect. Harassment or discrimination is never tolerated; report it to your manager, the People team, or the anonymous whistleblowing line.`,
  `Leaving the company. The notice period after probation is one month for the first two years and three months afterwards. Return your equipment on your last day; IT wipes the devices. You receive a written reference on request.`,
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
];
