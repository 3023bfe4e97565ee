// Opens pages in headless Chromium through the DevTools protocol (over a pipe: no
// WebSocket library needed) and reports what a user would see: images and whether each
// loaded, cards, overlays, console errors and failed loads, and a screenshot.
//
//   node browser_check.mjs OUT_DIR URL...
//
// Prints one JSON object: {"pages": [{"url", "title", "images", "broken": [src...],
// "cards", "overlays", "errors": [text...], "links": [href...], "screenshot"}]}.
// Exits 1 when Chromium cannot be started or a page does not load.
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [outDir, ...urls] = process.argv.slice(2);
const chromium = process.env.CHROMIUM || 'chromium';
const browser = spawn(chromium, [
  '--headless=new', '--no-sandbox', '--disable-gpu', '--no-first-run', '--hide-scrollbars',
  '--allow-file-access-from-files', '--disable-dev-shm-usage', '--remote-debugging-pipe', 'about:blank',
], { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] });
let stderr = '';
browser.stderr.on('data', (d) => { stderr += d; });
browser.on('error', (e) => { console.error(`cannot start ${chromium}: ${e.message}`); process.exit(1); });

let nextId = 1;
const pending = new Map();
const listeners = [];
let buffer = '';
browser.stdio[4].on('data', (chunk) => {
  buffer += chunk.toString('utf8');
  let end;
  while ((end = buffer.indexOf('\0')) >= 0) {
    const msg = JSON.parse(buffer.slice(0, end));
    buffer = buffer.slice(end + 1);
    if (msg.id && pending.has(msg.id)) {
      const { resolve, reject } = pending.get(msg.id);
      pending.delete(msg.id);
      if (msg.error) reject(new Error(JSON.stringify(msg.error)));
      else resolve(msg.result);
    } else {
      for (const l of listeners) l(msg);
    }
  }
});

function send(method, params = {}, sessionId = undefined) {
  const id = nextId++;
  const msg = { id, method, params };
  if (sessionId) msg.sessionId = sessionId;
  browser.stdio[3].write(JSON.stringify(msg) + '\0');
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
}

function waitFor(pred, ms) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timed out')), ms);
    listeners.push((m) => { if (pred(m)) { clearTimeout(timer); resolve(m); } });
  });
}

// Runs in the page: makes lazy images load, waits for every image, then describes the page.
const inspect = `(async () => {
  for (const img of document.images) img.loading = 'eager';
  window.scrollTo(0, document.body.scrollHeight);
  await Promise.all([...document.images].map((i) => i.complete ? 0 :
      new Promise((r) => { i.addEventListener('load', r); i.addEventListener('error', r); })));
  window.scrollTo(0, 0);
  const imgs = [...document.images];
  return {
    title: document.title,
    images: imgs.length,
    broken: imgs.filter((i) => !(i.complete && i.naturalWidth > 0)).map((i) => i.getAttribute('src')),
    cards: document.querySelectorAll('.card').length,
    overlays: document.querySelectorAll('.pic svg').length,
    boxes: document.querySelectorAll('.pic svg rect').length,
    links: [...document.querySelectorAll('a[href]')].map((a) => a.getAttribute('href')),
  };
})()`;

async function check(url, index) {
  const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
  const errors = [];
  listeners.push((m) => {
    if (m.sessionId !== sessionId) return;
    if (m.method === 'Runtime.consoleAPICalled' && (m.params.type === 'error' || m.params.type === 'assert'))
      errors.push(m.params.args.map((a) => a.value ?? a.description).join(' '));
    if (m.method === 'Runtime.exceptionThrown') errors.push(m.params.exceptionDetails.text);
    if (m.method === 'Log.entryAdded' && m.params.entry.level === 'error') errors.push(m.params.entry.text + ' ' + (m.params.entry.url || ''));
  });
  await send('Page.enable', {}, sessionId);
  await send('Runtime.enable', {}, sessionId);
  await send('Log.enable', {}, sessionId);
  await send('Emulation.setDeviceMetricsOverride', { width: 1280, height: 1000, deviceScaleFactor: 1, mobile: false }, sessionId);
  const loaded = waitFor((m) => m.sessionId === sessionId && m.method === 'Page.loadEventFired', 30000);
  const nav = await send('Page.navigate', { url }, sessionId);
  if (nav.errorText) throw new Error(`${url}: ${nav.errorText}`);
  await loaded;
  const r = await send('Runtime.evaluate', { expression: inspect, awaitPromise: true, returnByValue: true }, sessionId);
  if (r.exceptionDetails) throw new Error(`${url}: ${r.exceptionDetails.text}`);
  const shot = await send('Page.captureScreenshot', { format: 'png' }, sessionId);
  const screenshot = join(outDir, `page-${index}.png`);
  writeFileSync(screenshot, Buffer.from(shot.data, 'base64'));
  await send('Target.closeTarget', { targetId });
  return { url, ...r.result.value, errors, screenshot };
}

const guard = setTimeout(() => { console.error('browser check timed out\n' + stderr); process.exit(1); }, 120000);
try {
  const pages = [];
  for (let i = 0; i < urls.length; ++i) pages.push(await check(urls[i], i));
  console.log(JSON.stringify({ pages }));
  clearTimeout(guard);
  await send('Browser.close').catch(() => {});
  process.exit(0);
} catch (e) {
  console.error(e.message + '\n' + stderr);
  process.exit(1);
}
