import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, engineName } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';
import { textFile } from './files.js';
import { indexPending, putAndSync, type TestApp } from './helpers.js';

/** Files indexed end to end, then searched through the route: what a file says is what is found. */
let t: TestApp;
const ORDERS_JSON = '{"orderId": 12345678901234567891, "price": 19.90, "sku": 9007199254740993}';
let stopIndexer: () => Promise<void>;

beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP });
  await putAndSync(t, 'wsp_main', 'prj_docs', [
    textFile('mz.txt', 'MZ Holdings quarterly report: revenue grew in the zanzibar region.'),
    textFile('orders.json', ORDERS_JSON, 'application/json'),
    textFile('hindi.txt', 'भारत की राजभाषा हिन्दी है और यह देवनागरी लिपि में लिखी जाती है।'),
    textFile('ko.txt', '데이터베이스 백업은 매일 새벽 세시에 실행됩니다.'),
    // PDF text layers commonly carry typographic ligatures (U+FB01 "ﬁ").
    textFile('ligature.txt', 'The conﬁguration of the ﬁrewall is deﬁned in this document.'),
    textFile('fullwidth.txt', 'Ｂａｃｋｕｐｓ ｒｕｎ ｏｎ ＰｏｓｔｇｒｅＳＱＬ nightly.'),
    textFile('zh.txt', '本项目的发布日期是明天。我的猫很可爱。'),
    textFile('ja.txt', '東京タワーへ行きました。'),
    textFile('th.txt', 'ภาษาไทยเป็นภาษาที่สวยงาม'),
    textFile('lo.txt', 'ພາສາລາວເປັນພາສາທີ່ສວຍງາມ'),
    textFile('km.txt', 'ភាសាខ្មែរគឺជាភាសាដ៏ស្រស់ស្អាត'),
    textFile('my.txt', 'မြန်မာဘာသာစကားသည်လှပသည်'),
  ]);
  stopIndexer = await indexPending(t);
}, 90_000);
afterAll(async () => {
  await stopIndexer();
  await t.close();
});

const search = async (q: string) => {
  const res = await t.app.inject({
    method: 'GET',
    url: `/v1/projects/prj_docs/search?q=${encodeURIComponent(q)}`,
    headers: { 'x-service-api-key': KEYS.mainOwner },
  });
  expect(res.statusCode, res.body).toBe(200);
  return (res.json().data.results as Array<{ path: string }>).map((r) => r.path);
};
const indexStatus = async (path: string) =>
  (
    await t.env.database.db
      .selectFrom('project_files')
      .select('index_status')
      .where('path', '=', path)
      .executeTakeFirstOrThrow()
  ).index_status;

describe(`indexed text and search keep what files say (${engineName})`, () => {
  it('indexes a text file that happens to start with "MZ" as text, and finds it', async () => {
    expect(await indexStatus('mz.txt')).toBe('indexed');
    expect(await search('zanzibar')).toContain('mz.txt');
  });

  it('gives the model and search the numbers a JSON file holds, not rounded ones', async () => {
    const { text } = await t.env.database.db
      .selectFrom('knowledge_texts')
      .innerJoin('project_files', 'project_files.id', 'knowledge_texts.file_id')
      .select('knowledge_texts.text')
      .where('project_files.path', '=', 'orders.json')
      .executeTakeFirstOrThrow();
    for (const literal of ['12345678901234567891', '9007199254740993', '19.90'])
      expect(text).toContain(literal);
    expect(await search('12345678901234567891')).toContain('orders.json');
  });

  it('finds Hindi and Korean words by the very words the files hold', async () => {
    expect(await search('हिन्दी')).toContain('hindi.txt');
    expect(await search('देवनागरी')).toContain('hindi.txt');
    expect(await search('백업은')).toContain('ko.txt');
  });

  it('finds a Chinese or Japanese word inside an unspaced sentence, one-character words too', async () => {
    // Before: both engines kept a run up to its punctuation as one word; none of these was found.
    expect(await search('发布日期')).toContain('zh.txt');
    expect(await search('日期')).toContain('zh.txt');
    expect(await search('猫')).toContain('zh.txt');
    expect(await search('東京タワー')).toContain('ja.txt');
    expect(await search('明日')).not.toContain('zh.txt');
  });

  it('finds a Thai, Lao, Khmer or Burmese word inside an unspaced sentence', async () => {
    // Before: a run up to its space or punctuation was one word, found by the whole run only.
    expect(await search('สวยงาม')).toEqual(['th.txt']);
    expect(await search('ไทย')).toEqual(['th.txt']);
    expect(await search('ສວຍງາມ')).toEqual(['lo.txt']);
    expect(await search('ស្រស់ស្អាត')).toEqual(['km.txt']);
    expect(await search('လှပ')).toEqual(['my.txt']);
  });

  it('finds ligature and full-width text by the plain word, and the plain text by those forms', async () => {
    expect(await search('firewall')).toContain('ligature.txt');
    expect(await search('ﬁrewall')).toContain('ligature.txt');
    expect(await search('postgresql')).toContain('fullwidth.txt');
    expect(await search('ｚａｎｚｉｂａｒ')).toContain('mz.txt');
  });

  it('answers with the text as the file holds it, not its folded words', async () => {
    const res = await t.app.inject({
      method: 'GET',
      url: `/v1/projects/prj_docs/search?q=firewall`,
      headers: { 'x-service-api-key': KEYS.mainOwner },
    });
    expect(res.json().data.results[0].text).toBe(
      'The conﬁguration of the ﬁrewall is deﬁned in this document.',
    );
  });
});
