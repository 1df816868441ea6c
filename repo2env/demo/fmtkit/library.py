"""fmtkit as it stands at its first commits: the files the JavaScript demo's history starts from.

fmtkit is a small, dependency-free formatting library for Node.js (ordinals, English lists, byte
sizes, durations, plurals, numbers): CommonJS modules under ``lib/``, an ES module entry
(``index.mjs``) and TypeScript declarations (``index.d.ts``) beside them, and a mocha suite under
``test/`` whose files are CommonJS, ES modules and TypeScript (run through tsx). Several
functions carry the bugs that the PRs of :mod:`repo2env.demo.fmtkit.history` fix, so those PRs'
tests really fail before and pass after. The code must run on Node.js 18 and later.

``package-lock.json`` beside this module pins mocha and tsx and every package they pull in (npm
wrote it with ``omit-lockfile-registry-resolved``, so it names no registry): a lock file is how a
JavaScript environment is pinned where the registry's publish dates cannot be trusted.
"""

from __future__ import annotations

from importlib.resources import files

from repo2env.demo.spec import file_text

#: npm's lock file of fmtkit 0.1.0 (the releases edit only its two version lines).
PACKAGE_LOCK = (files(__package__) / "package-lock.json").read_text(encoding="utf-8")

PACKAGE_JSON = file_text("""
{
  "name": "fmtkit",
  "version": "0.1.0",
  "description": "Small, dependency-free formatting helpers: ordinals, lists, byte sizes, durations, plurals, numbers.",
  "license": "MIT",
  "author": "Margaret Hamilton <margaret@example.com>",
  "main": "lib/index.js",
  "types": "index.d.ts",
  "exports": {
    ".": {
      "types": "./index.d.ts",
      "import": "./index.mjs",
      "require": "./lib/index.js"
    },
    "./package.json": "./package.json"
  },
  "files": [
    "lib/",
    "index.mjs",
    "index.d.ts"
  ],
  "engines": {
    "node": ">=18"
  },
  "scripts": {
    "test": "mocha 'test/**/*.test.{js,mjs,ts}'"
  },
  "devDependencies": {
    "mocha": "^10.3.0",
    "tsx": "^4.7.1"
  }
}
""")

MOCHARC = file_text("""
{
  "require": ["tsx/cjs"],
  "extension": ["js", "mjs", "ts"]
}
""")

NVMRC = "18\n"

GITIGNORE = file_text("""
node_modules/
coverage/
*.log
.DS_Store
""")

README = file_text("""
# fmtkit

Small, dependency-free formatting helpers for Node.js 18+.

```js
const { ordinal, formatList, formatBytes, formatDuration } = require("fmtkit");

ordinal(2);                            // "2nd"
formatList(["tea", "coffee", "juice"]); // "tea, coffee, and juice"
formatBytes(1500);                     // "1.5 kB"
formatDuration(5_400_000);             // "1h 30m"
```

ES modules get the same functions as named exports (`import { ordinal } from "fmtkit"`), and
TypeScript gets their types from `index.d.ts`.

## Install

```
npm install fmtkit
```

## Develop

```
npm ci
npm test
```
""")

CHANGELOG = file_text("""
# Changelog

All notable changes to fmtkit are listed here. The format follows Keep a Changelog.

## Unreleased

## 0.1.0 - 2024-03-04

- First release: `ordinal`, `formatList`, `formatBytes`, `parseBytes`, `formatDuration`,
  `parseDuration`, `pluralize` and `formatNumber`.
""")

LIB_INDEX = file_text("""
"use strict";

const { formatBytes, parseBytes } = require("./bytes");
const { formatDuration, parseDuration } = require("./duration");
const { formatList } = require("./list");
const { formatNumber } = require("./number");
const { ordinal } = require("./ordinal");
const { pluralize } = require("./plural");

module.exports = {
  formatBytes,
  formatDuration,
  formatList,
  formatNumber,
  ordinal,
  parseBytes,
  parseDuration,
  pluralize,
};
""")

INDEX_MJS = file_text("""
// The ES module entry: the CommonJS build's functions as named exports, and the module as default.
import fmtkit from "./lib/index.js";

export const {
  formatBytes,
  formatDuration,
  formatList,
  formatNumber,
  ordinal,
  parseBytes,
  parseDuration,
  pluralize,
} = fmtkit;

export default fmtkit;
""")

INDEX_DTS = file_text("""
export interface ByteOptions {
  /** Powers of 1024 (KiB, MiB ...) instead of powers of 1000 (kB, MB ...). */
  binary?: boolean;
  /** Digits after the decimal point; 1 by default. */
  decimals?: number;
}

export interface ListOptions {
  /** The word before the last item; "and" by default. */
  conjunction?: string;
}

export interface NumberOptions {
  /** Digits after the decimal point; 0 by default. */
  decimals?: number;
  /** What separates groups of thousands; "," by default. */
  separator?: string;
}

export function formatBytes(bytes: number, options?: ByteOptions): string;
export function parseBytes(text: string): number;
export function formatDuration(milliseconds: number): string;
export function parseDuration(text: string): number;
export function formatList(items: Iterable<unknown>, options?: ListOptions): string;
export function formatNumber(value: number | bigint, options?: NumberOptions): string;
export function ordinal(n: number): string;
export function pluralize(word: string, count?: number, plural?: string): string;
""")

ORDINAL = file_text("""
"use strict";

const SUFFIXES = new Map([
  [1, "st"],
  [2, "nd"],
  [3, "rd"],
]);

function suffixOf(n) {
  return SUFFIXES.get(n % 10) || "th";
}

/**
 * The English ordinal of an integer: 1 -> "1st", 22 -> "22nd", 103 -> "103rd", 4 -> "4th".
 *
 * Negative numbers keep their sign: -1 -> "-1st".
 *
 * @param {number} n
 * @returns {string}
 */
function ordinal(n) {
  return `${n}${suffixOf(Math.abs(n))}`;
}

module.exports = { ordinal };
""")

LIST = file_text("""
"use strict";

/**
 * Join items into an English list: ["a", "b", "c"] -> "a, b, and c".
 *
 * The last item follows `conjunction` ("and" by default), after a serial comma when there are
 * three items or more.
 *
 * @param {unknown[]} items
 * @param {{conjunction?: string}} [options]
 * @returns {string}
 */
function formatList(items, { conjunction = "and" } = {}) {
  if (items.length === 0) {
    return "";
  }
  if (items.length === 1) {
    return String(items[0]);
  }

  const head = items.slice(0, -1).join(", ");
  return `${head}, ${conjunction} ${items[items.length - 1]}`;
}

module.exports = { formatList };
""")

BYTES = file_text(r"""
"use strict";

const DECIMAL_UNITS = ["B", "kB", "MB", "GB", "TB"];
const BINARY_UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];
const FACTORS = new Map([
  ["b", 1],
  ["kb", 1e3],
  ["mb", 1e6],
  ["gb", 1e9],
  ["tb", 1e12],
  ["kib", 1024],
  ["mib", 1024 ** 2],
  ["gib", 1024 ** 3],
  ["tib", 1024 ** 4],
]);
const SIZE = /^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$/i;

/**
 * A byte count for people: 1500 -> "1.5 kB", or "1.5 KiB" for 1536 with `binary`.
 *
 * @param {number} bytes
 * @param {{binary?: boolean, decimals?: number}} [options]
 * @returns {string}
 */
function formatBytes(bytes, { binary = false, decimals = 1 } = {}) {
  const base = binary ? 1024 : 1000;
  const units = binary ? BINARY_UNITS : DECIMAL_UNITS;
  let size = bytes;
  let unit = units[0];
  for (unit of units) {
    if (Math.abs(size) < base || unit === units[units.length - 1]) {
      break;
    }
    size /= base;
  }
  return unit === "B" ? `${size} B` : `${size.toFixed(decimals)} ${unit}`;
}

/**
 * The number of bytes a size such as "1.5 kB", "2 MiB" or "10 B" stands for (units in any case).
 *
 * @param {string} text
 * @returns {number}
 */
function parseBytes(text) {
  const match = SIZE.exec(text);
  const factor = match && FACTORS.get(match[2].toLowerCase());
  if (!factor) {
    throw new Error(`not a byte size: ${JSON.stringify(text)}`);
  }
  return Math.trunc(Number(match[1]) * factor);
}

module.exports = { formatBytes, parseBytes };
""")

DURATION = file_text(r"""
"use strict";

// Largest first: formatDuration emits the units in this order.
const UNITS = [
  ["d", 86_400_000],
  ["h", 3_600_000],
  ["m", 60_000],
  ["s", 1000],
  ["ms", 1],
];
const MILLISECONDS = new Map(UNITS);
const PART = /(\d+)\s*(ms|[dhms])/g;

/**
 * The milliseconds a duration such as "1h30m", "2d 4h" or "250ms" stands for.
 *
 * @param {string} text
 * @returns {number}
 */
function parseDuration(text) {
  const parts = [...text.matchAll(PART)];
  if (parts.length === 0) {
    throw new Error(`not a duration: ${JSON.stringify(text)}`);
  }
  return parts.reduce((total, [, amount, unit]) => total + Number(amount) * MILLISECONDS.get(unit), 0);
}

/**
 * A duration in milliseconds as parseDuration reads it: 5400000 -> "1h 30m", 1500 -> "1s 500ms".
 *
 * @param {number} milliseconds
 * @returns {string}
 */
function formatDuration(milliseconds) {
  let rest = Math.round(milliseconds);
  const parts = [];
  for (const [unit, size] of UNITS) {
    if (rest >= size || (unit === "ms" && parts.length === 0)) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  return parts.join(" ");
}

module.exports = { formatDuration, parseDuration };
""")

PLURAL = file_text("""
"use strict";

const IRREGULAR = new Map([
  ["child", "children"],
  ["mouse", "mice"],
  ["person", "people"],
]);

/**
 * The form of `word` that goes with `count`: the word itself for one, its plural otherwise.
 *
 * `plural` overrides the plural; a few irregular nouns know theirs.
 *
 * @param {string} word
 * @param {number} [count]
 * @param {string} [plural]
 * @returns {string}
 */
function pluralize(word, count = 2, plural = undefined) {
  if (count === 1) {
    return word;
  }
  if (plural !== undefined) {
    return plural;
  }
  const irregular = IRREGULAR.get(word.toLowerCase());
  if (irregular) {
    return irregular;
  }
  return `${word}s`;
}

module.exports = { pluralize };
""")

NUMBER = file_text(r"""
"use strict";

const THOUSANDS = /\B(?=(\d{3})+(?!\d))/g;

/**
 * A number with its thousands grouped: 1234567.891 -> "1,234,568", or "1,234,567.89" with
 * `decimals: 2`.
 *
 * @param {number} value
 * @param {{decimals?: number, separator?: string}} [options]
 * @returns {string}
 */
function formatNumber(value, { decimals = 0, separator = "," } = {}) {
  const [whole, fraction] = value.toFixed(decimals).split(".");
  const grouped = whole.replace(THOUSANDS, separator);
  return fraction === undefined ? grouped : `${grouped}.${fraction}`;
}

module.exports = { formatNumber };
""")

TEST_FIXTURES = file_text("""
"use strict";

// Data several test files share.

/** Drinks for list tests, in menu order. */
const DRINKS = ["tea", "coffee", "juice"];

module.exports = { DRINKS };
""")

TEST_ORDINAL = file_text("""
"use strict";

const assert = require("node:assert/strict");
const { ordinal } = require("../lib/ordinal");

describe("ordinal", () => {
  it("uses st, nd and rd after 1, 2 and 3", () => {
    assert.equal(ordinal(1), "1st");
    assert.equal(ordinal(2), "2nd");
    assert.equal(ordinal(3), "3rd");
  });

  it("uses th after other digits", () => {
    assert.equal(ordinal(4), "4th");
    assert.equal(ordinal(10), "10th");
    assert.equal(ordinal(100), "100th");
  });

  it("handles larger numbers", () => {
    assert.equal(ordinal(21), "21st");
    assert.equal(ordinal(42), "42nd");
    assert.equal(ordinal(103), "103rd");
  });

  it("keeps the sign of negative numbers", () => {
    assert.equal(ordinal(-1), "-1st");
  });
});
""")

TEST_LIST = file_text("""
"use strict";

const assert = require("node:assert/strict");
const { formatList } = require("../lib/list");
const { DRINKS } = require("./fixtures");

describe("formatList", () => {
  it("returns an empty string for no items", () => {
    assert.equal(formatList([]), "");
  });

  it("returns a single item as is", () => {
    assert.equal(formatList(["tea"]), "tea");
  });

  it("joins three items with a serial comma", () => {
    assert.equal(formatList(DRINKS), "tea, coffee, and juice");
  });

  it("uses a custom conjunction", () => {
    assert.equal(formatList(DRINKS, { conjunction: "or" }), "tea, coffee, or juice");
  });

  it("converts items to strings", () => {
    assert.equal(formatList([1, 2, 3]), "1, 2, and 3");
  });
});
""")

TEST_BYTES = file_text("""
"use strict";

const assert = require("node:assert/strict");
const { formatBytes, parseBytes } = require("../lib/bytes");

describe("bytes", () => {
  describe("formatBytes", () => {
    it("formats bytes", () => {
      assert.equal(formatBytes(500), "500 B");
    });

    it("formats decimal units", () => {
      assert.equal(formatBytes(1500), "1.5 kB");
      assert.equal(formatBytes(2_500_000), "2.5 MB");
    });

    it("formats binary units", () => {
      assert.equal(formatBytes(1536, { binary: true }), "1.5 KiB");
    });

    it("honours decimals", () => {
      assert.equal(formatBytes(1_234_567, { decimals: 2 }), "1.23 MB");
    });
  });

  describe("parseBytes", () => {
    it("parses sizes", () => {
      assert.equal(parseBytes("1.5 kB"), 1500);
      assert.equal(parseBytes("2 MiB"), 2_097_152);
      assert.equal(parseBytes("10 b"), 10);
    });

    it("rejects unknown units", () => {
      assert.throws(() => parseBytes("12 parsecs"), /not a byte size/);
    });
  });
});
""")

TEST_DURATION = file_text("""
import { strict as assert } from "node:assert";
import { formatDuration, parseDuration } from "../lib/duration";

describe("duration", () => {
  describe("parseDuration", () => {
    const singleUnits: Array<[string, number]> = [
      ["45s", 45_000],
      ["2m", 120_000],
      ["3h", 10_800_000],
      ["1d", 86_400_000],
      ["250ms", 250],
    ];
    for (const [text, milliseconds] of singleUnits) {
      it(`parses ${text}`, () => {
        assert.equal(parseDuration(text), milliseconds);
      });
    }

    it("parses compound durations", () => {
      assert.equal(parseDuration("1h30m"), 5_400_000);
      assert.equal(parseDuration("2d 4h"), 187_200_000);
    });

    it("rejects text without numbers", () => {
      assert.throws(() => parseDuration("soon"), /not a duration/);
    });
  });

  describe("formatDuration", () => {
    it("formats compound durations", () => {
      assert.equal(formatDuration(90_061_000), "1d 1h 1m 1s");
    });

    it("formats milliseconds", () => {
      assert.equal(formatDuration(1500), "1s 500ms");
    });

    it("round-trips through parseDuration", () => {
      const samples: number[] = [1, 999, 61_000, 5_400_000, 90_061_001];
      for (const milliseconds of samples) {
        assert.equal(parseDuration(formatDuration(milliseconds)), milliseconds);
      }
    });
  });
});
""")

TEST_PLURAL = file_text("""
"use strict";

const assert = require("node:assert/strict");
const { pluralize } = require("../lib/plural");

describe("pluralize", () => {
  it("returns the word for one", () => {
    assert.equal(pluralize("file", 1), "file");
  });

  it("adds s for other counts", () => {
    assert.equal(pluralize("file", 0), "files");
    assert.equal(pluralize("file", 3), "files");
  });

  it("knows irregular plurals", () => {
    assert.equal(pluralize("person"), "people");
    assert.equal(pluralize("child", 2), "children");
  });

  it("uses the plural it is given", () => {
    assert.equal(pluralize("octopus", 2, "octopodes"), "octopodes");
  });
});
""")

TEST_NUMBER = file_text("""
"use strict";

const assert = require("node:assert/strict");
const { formatNumber } = require("../lib/number");

describe("formatNumber", () => {
  it("groups thousands", () => {
    assert.equal(formatNumber(1_234_567), "1,234,567");
  });

  it("rounds to the given decimals", () => {
    assert.equal(formatNumber(1234.5678, { decimals: 2 }), "1,234.57");
  });

  it("uses a custom separator", () => {
    assert.equal(formatNumber(1_000_000, { separator: " " }), "1 000 000");
  });

  it("keeps the sign of negative numbers", () => {
    assert.equal(formatNumber(-98_765), "-98,765");
  });
});
""")

TEST_ESM = file_text("""
import assert from "node:assert/strict";
import { createRequire } from "node:module";

import * as fmtkit from "../index.mjs";

const require = createRequire(import.meta.url);
const commonjs = require("../lib/index.js");

describe("ES module entry", () => {
  it("has a named export for every CommonJS export", () => {
    for (const name of Object.keys(commonjs)) {
      assert.equal(fmtkit[name], commonjs[name], name);
    }
  });

  it("has the CommonJS module as its default export", () => {
    assert.equal(fmtkit.default, commonjs);
  });

  it("formats through its named exports", () => {
    assert.equal(fmtkit.ordinal(2), "2nd");
    assert.equal(fmtkit.formatBytes(1500), "1.5 kB");
  });
});
""")

API_DOCS = file_text("""
# fmtkit API

Every function is a named export of `fmtkit`, for `require` and for `import` alike.

## ordinal(n)

```js
ordinal(1);   // "1st"
ordinal(22);  // "22nd"
ordinal(104); // "104th"
```

## formatList(items, { conjunction })

```js
formatList(["tea", "coffee", "juice"]);          // "tea, coffee, and juice"
formatList(["tea", "coffee"], { conjunction: "or" });
```

## formatBytes(bytes, { binary, decimals }) and parseBytes(text)

Decimal units (kB, MB ...) by default, binary ones (KiB, MiB ...) with `binary: true`:

```js
formatBytes(1024);                   // "1 KiB"
formatBytes(1536, { binary: true }); // "1.5 KiB"
parseBytes("1.5 kB");                // 1500
```

## formatDuration(milliseconds) and parseDuration(text)

```js
formatDuration(5_400_000); // "1h 30m"
parseDuration("1h30m");    // 5400000
```

## pluralize(word, count, plural)

```js
pluralize("file", 3);   // "files"
pluralize("person", 2); // "people"
```

## formatNumber(value, { decimals, separator })

```js
formatNumber(1234567.891);                  // "1,234,568"
formatNumber(1234567.891, { decimals: 2 }); // "1,234,567.89"
```
""")

INITIAL_FILES: dict[str, str] = {
    ".gitignore": GITIGNORE,
    ".mocharc.json": MOCHARC,
    ".nvmrc": NVMRC,
    "CHANGELOG.md": CHANGELOG,
    "README.md": README,
    "index.d.ts": INDEX_DTS,
    "index.mjs": INDEX_MJS,
    "lib/bytes.js": BYTES,
    "lib/duration.js": DURATION,
    "lib/index.js": LIB_INDEX,
    "lib/list.js": LIST,
    "lib/number.js": NUMBER,
    "lib/ordinal.js": ORDINAL,
    "lib/plural.js": PLURAL,
    "package-lock.json": PACKAGE_LOCK,
    "package.json": PACKAGE_JSON,
    "test/bytes.test.js": TEST_BYTES,
    "test/duration.test.ts": TEST_DURATION,
    "test/esm.test.mjs": TEST_ESM,
    "test/fixtures.js": TEST_FIXTURES,
    "test/list.test.js": TEST_LIST,
    "test/number.test.js": TEST_NUMBER,
    "test/ordinal.test.js": TEST_ORDINAL,
    "test/plural.test.js": TEST_PLURAL,
}
