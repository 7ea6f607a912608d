#!/usr/bin/env node
// run_browser.mjs: runs a WebAssembly module exported by `kiln compile ... --target
// "llvm -mtriple=wasm32-unknown-unknown -mattr=+simd128"` in headless Chromium, through the same
// web/kiln_runtime.mjs Node uses, and writes its outputs like run_model.mjs.
//
//   node web/run_browser.mjs DIR [--input IN.raw]... [--output OUT.raw]... [--chromium PATH] [--timeout S]
//
// A local HTTP server (127.0.0.1, a free port) serves web/run_page.html, kiln_runtime.mjs, the
// module's files under /module/ and the inputs under /input/K; the page runs the module once and
// posts each output's bytes back. Chromium: --chromium, else $KILN_CHROMIUM, else `chromium` on
// PATH (Debian's package; scripts/install-deps.sh installs it). Prints the browser, every input's
// and output's name, dtype and shape. Errors are one line `error: ...` with runtime/error.h's
// exit code (6: no browser, or it did not answer in time).
import {spawn} from 'node:child_process';
import {accessSync, constants, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs';
import {createServer} from 'node:http';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {fileURLToPath} from 'node:url';

import {KilnError} from './kiln_runtime.mjs';

const webDir = path.dirname(fileURLToPath(import.meta.url));
const MIME = {'.html': 'text/html', '.mjs': 'text/javascript', '.wasm': 'application/wasm'};

function parseArgs(argv) {
  const args = {dir: null, inputs: [], outputs: [], chromium: process.env.KILN_CHROMIUM || '', timeout: 300};
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new KilnError(`${a} needs a value`, 2);
      return argv[++i];
    };
    if (a === '--input') args.inputs.push(value());
    else if (a === '--output') args.outputs.push(value());
    else if (a === '--chromium') args.chromium = value();
    else if (a === '--timeout') args.timeout = Number(value());
    else if (a.startsWith('--')) throw new KilnError(`unknown option ${a}`, 2);
    else if (args.dir === null) args.dir = a;
    else throw new KilnError(`unexpected argument ${a}`, 2);
  }
  if (args.dir === null) throw new KilnError('no module directory (usage: run_browser.mjs DIR [--input IN.raw]... [--output OUT.raw]...)', 2);
  return args;
}

function findChromium(requested) {
  const candidates = requested ? [requested] : (process.env.PATH ?? '').split(':').map((d) => path.join(d || '.', 'chromium'));
  for (const c of candidates) {
    try {
      accessSync(c, constants.X_OK);
      return c;
    } catch {
      // next
    }
  }
  throw new KilnError(requested ? `${requested}: not an executable browser` : 'no chromium on PATH (install Debian\'s chromium, or pass --chromium PATH)', 6);
}

function readOrFail(file) {
  try {
    return readFileSync(file);
  } catch (e) {
    throw new KilnError(`${file}: cannot open file (${e.code ?? e.message})`, 6);
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const chromium = findChromium(args.chromium);
  readOrFail(path.join(args.dir, 'graph.txt'));  // a missing module fails here, not in the page
  const inputs = args.inputs.map(readOrFail);
  const outputs = [];
  let finish;
  const done = new Promise((resolve) => { finish = resolve; });

  const server = createServer((req, res) => {
    const url = new URL(req.url, 'http://localhost');
    const send = (status, body, type = 'application/octet-stream') => {
      res.writeHead(status, {'Content-Type': type, 'Cache-Control': 'no-store'});
      res.end(body);
    };
    if (req.method === 'POST') {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const out = /^\/output\/([0-9]+)$/.exec(url.pathname);
        if (out) outputs[Number(out[1])] = body;
        send(200, '');
        if (url.pathname === '/done') finish(JSON.parse(body.toString('utf8')));
      });
      return;
    }
    const file = decodeURIComponent(url.pathname);
    if (file === '/job') return send(200, JSON.stringify({name: args.dir, inputs: inputs.length}), 'application/json');
    if (file === '/' || file === '/run_page.html') return send(200, readFileSync(path.join(webDir, 'run_page.html')), MIME['.html']);
    if (file === '/kiln_runtime.mjs') return send(200, readFileSync(path.join(webDir, 'kiln_runtime.mjs')), MIME['.mjs']);
    const input = /^\/input\/([0-9]+)$/.exec(file);
    if (input && Number(input[1]) < inputs.length) return send(200, inputs[Number(input[1])]);
    const moduleFile = /^\/module\/([^/]+)$/.exec(file);
    if (moduleFile) {
      try {
        return send(200, readFileSync(path.join(args.dir, moduleFile[1])), MIME[path.extname(moduleFile[1])]);
      } catch {
        return send(404, 'no such file');
      }
    }
    send(404, 'not found');
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}/run_page.html`;

  const profile = mkdtempSync(path.join(tmpdir(), 'kiln-chromium-'));
  const browser = spawn(chromium, ['--headless=new', '--no-sandbox', '--disable-gpu', '--no-first-run',
                                   '--disable-extensions', '--disable-dev-shm-usage', `--user-data-dir=${profile}`, url],
                        {stdio: ['ignore', 'ignore', 'pipe'], detached: true});
  let browserLog = '';
  browser.stderr.on('data', (d) => { browserLog += d; });
  const exited = new Promise((resolve) => browser.on('exit', (code) => resolve(code)));
  browser.on('error', (e) => finish({ok: false, error: `cannot start ${chromium}: ${e.message}`, exitCode: 6}));
  let timer;
  const timeout = new Promise((resolve) => {
    timer = setTimeout(() => resolve({ok: false, exitCode: 6,
      error: `${chromium} did not finish the page in ${args.timeout} s${browserLog ? ': ' + browserLog.trim().split('\n').pop() : ''}`}),
    args.timeout * 1000);
  });
  const early = exited.then((code) => ({ok: false, exitCode: 6,
    error: `${chromium} exited (${code}) before the page finished${browserLog ? ': ' + browserLog.trim().split('\n').pop() : ''}`}));
  const result = await Promise.race([done, timeout, early]);
  clearTimeout(timer);
  // Chromium forks renderer and helper processes that keep writing to the
  // profile after the browser process dies; it was started as a process group
  // leader, so kill the whole group before removing the profile.
  try { process.kill(-browser.pid, 'SIGKILL'); } catch { browser.kill('SIGKILL'); }
  await Promise.race([exited, new Promise((r) => setTimeout(r, 2000))]);
  server.close();
  try {
    rmSync(profile, {recursive: true, force: true, maxRetries: 10, retryDelay: 200});
  } catch (e) {
    process.stderr.write(`warning: could not remove ${profile}: ${e.message}\n`);
  }
  if (!result.ok) throw new KilnError(result.error, result.exitCode ?? 70);

  for (const [i, file] of args.outputs.entries()) {
    if (!outputs[i]) throw new KilnError(`the page posted no output ${i}`, 70);
    writeFileSync(file, outputs[i]);
  }
  console.log(`browser: ${result.userAgent}`);
  result.inputs.forEach((t, i) => console.log(`input ${i}: ${t.name} ${t.dtype} [${t.shape.join(',')}]`));
  result.outputs.forEach((t, i) => console.log(`output ${i}: ${t.name} ${t.dtype} [${t.shape.join(',')}]`));
  console.log(`run: ${result.ms.toFixed(3)} ms`);
}

main().then(() => process.exit(0)).catch((e) => {
  const message = e instanceof KilnError ? e.message : `internal: ${e.stack ?? e}`;
  process.stderr.write(`error: ${message.split('\n')[0]}\n`);
  process.exit(e instanceof KilnError ? e.exitCode : 70);
});
