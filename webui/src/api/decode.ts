// Decoders: check a JSON value against the shape the code expects, and say where it is
// wrong. Every answer from the master passes through one of these before a page sees it.
//
// Paths are built only when something is wrong (each level adds its part while the error
// unwinds), so decoding 100,000 metric reports allocates nothing extra.

export class DecodeError extends Error {
  constructor(
    readonly problem: string,
    readonly parts: readonly string[] = [],
  ) {
    super(`${parts.length ? parts.join("").replace(/^\./, "") : "response"}: ${problem}`);
    this.name = "DecodeError";
  }

  get path(): string {
    return this.parts.join("").replace(/^\./, "");
  }

  /** The same error one level further out (`part` is ".name" or "[3]"). */
  at(part: string): DecodeError {
    return new DecodeError(this.problem, [part, ...this.parts]);
  }
}

export type Decoder<T> = (value: unknown) => T;

/** Decode `value`, naming `root` (e.g. "response") in any error. */
export function decode<T>(decoder: Decoder<T>, value: unknown, root = ""): T {
  try {
    return decoder(value);
  } catch (e) {
    if (e instanceof DecodeError && root) throw e.at(root);
    throw e;
  }
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "string" ? `the string ${JSON.stringify(value.slice(0, 40))}` : typeof value;
}

export const str: Decoder<string> = (value) => {
  if (typeof value !== "string") throw new DecodeError(`expected a string, got ${describe(value)}`);
  return value;
};

export const num: Decoder<number> = (value) => {
  if (typeof value === "number") return value;
  // proto3 JSON writes non-finite doubles as strings.
  if (value === "NaN") return NaN;
  if (value === "Infinity") return Infinity;
  if (value === "-Infinity") return -Infinity;
  throw new DecodeError(`expected a number, got ${describe(value)}`);
};

const INTEGER = /^-?\d+$/;

/** proto3 JSON writes 64-bit integers as decimal strings; 32-bit ones as numbers. */
export const int: Decoder<number> = (value) => {
  if (typeof value === "number" && Number.isInteger(value)) return value;
  if (typeof value === "string" && INTEGER.test(value)) return Number(value);
  throw new DecodeError(`expected an integer, got ${describe(value)}`);
};

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

/** A time as proto3 JSON writes a Timestamp ("2024-05-01T12:00:00.250Z"), in seconds since the
 * epoch, as the pages show and compare times. */
export const time: Decoder<number> = (value) => {
  if (typeof value !== "string" || !RFC3339.test(value)) {
    throw new DecodeError(`expected an RFC 3339 time, got ${describe(value)}`);
  }
  const fraction = /\.(\d+)/.exec(value)?.[1] ?? "";
  // Date.parse keeps milliseconds; the rest of the fraction is added back.
  const extra = fraction.length > 3 ? Number(`0.000${fraction.slice(3)}`) : 0;
  return Date.parse(value) / 1000 + extra;
};

export const bool: Decoder<boolean> = (value) => {
  if (typeof value !== "boolean") throw new DecodeError(`expected true or false, got ${describe(value)}`);
  return value;
};

export function nullable<T>(decoder: Decoder<T>): Decoder<T | null> {
  return (value) => (value === null || value === undefined ? null : decoder(value));
}

/** A field the master may leave out; absent means `fallback`. */
export function optional<T>(decoder: Decoder<T>, fallback: T): Decoder<T> {
  return (value) => (value === undefined ? fallback : decoder(value));
}

export function array<T>(decoder: Decoder<T>): Decoder<T[]> {
  return (value) => {
    if (!Array.isArray(value)) throw new DecodeError(`expected an array, got ${describe(value)}`);
    const out = new Array<T>(value.length);
    let i = 0;
    try {
      for (; i < value.length; i++) out[i] = decoder(value[i]);
    } catch (e) {
      throw e instanceof DecodeError ? e.at(`[${i}]`) : e;
    }
    return out;
  };
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function record<T>(decoder: Decoder<T>): Decoder<Record<string, T>> {
  return (value) => {
    if (!isObject(value)) throw new DecodeError(`expected an object, got ${describe(value)}`);
    const out: Record<string, T> = {};
    for (const key in value) {
      try {
        out[key] = decoder(value[key]);
      } catch (e) {
        throw e instanceof DecodeError ? e.at(`.${key}`) : e;
      }
    }
    return out;
  };
}

/** Any JSON object, as it is (free-form documents: hyperparameters, metrics, metadata). */
export const anyObject: Decoder<Record<string, unknown>> = (value) => {
  if (!isObject(value)) throw new DecodeError(`expected an object, got ${describe(value)}`);
  return value;
};

export type Shape<T> = { [K in keyof T]: Decoder<T[K]> };

/** An object with exactly the listed fields decoded; extra fields are ignored. */
export function object<T>(shape: Shape<T>): Decoder<T> {
  const keys = Object.keys(shape) as (keyof T & string)[];
  const decoders = keys.map((k) => shape[k]);
  return (value) => {
    if (!isObject(value)) throw new DecodeError(`expected an object, got ${describe(value)}`);
    const out: Record<string, unknown> = {};
    let i = 0;
    try {
      for (; i < keys.length; i++) {
        const key = keys[i] as string;
        out[key] = (decoders[i] as Decoder<unknown>)(value[key]);
      }
    } catch (e) {
      throw e instanceof DecodeError ? e.at(`.${keys[i]}`) : e;
    }
    return out as T;
  };
}

export const unknownValue: Decoder<unknown> = (value) => value;

/** A field that carries a JSON document as a string (configs, hyperparameters, metrics). */
export function jsonText<T>(decoder: Decoder<T>, empty: T): Decoder<T> {
  return (value) => {
    const text = str(value);
    if (text === "") return empty;
    let parsed: unknown;
    try {
      parsed = parseJson(text);
    } catch {
      throw new DecodeError("expected a JSON document in the string");
    }
    return decoder(parsed);
  };
}

const NON_FINITE: Record<string, number> = { NaN: NaN, Infinity: Infinity, "-Infinity": -Infinity };
// A JSON string literal, or one of the bare words Python's json module writes for non-finite floats.
const STRING_OR_NON_FINITE = /"(?:[^"\\]|\\.)*"|-?Infinity|NaN/g;
// Marks a non-finite number while JSON.parse runs: a string starting with NUL, which no metric
// name or value plausibly does.
const MARK = "\u0000";

/**
 * JSON.parse that also reads the NaN, Infinity and -Infinity that Python's json module writes:
 * metrics come from training code, and a diverging loss is NaN.
 */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    if (!/NaN|Infinity/.test(text)) throw e;
  }
  const marked = text.replace(STRING_OR_NON_FINITE, (m) => (m in NON_FINITE ? `"\\u0000${m}"` : m));
  return JSON.parse(marked, (_key, value: unknown) =>
    typeof value === "string" && value.startsWith(MARK) && value.slice(1) in NON_FINITE
      ? NON_FINITE[value.slice(1)]
      : value,
  );
}

export function map<A, B>(decoder: Decoder<A>, f: (a: A) => B): Decoder<B> {
  return (value) => f(decoder(value));
}
