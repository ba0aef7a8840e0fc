// Formatting values for people.

import type { State } from "../api/types";

export function time(seconds: number | null | undefined): string {
  if (!seconds) return "–";
  const d = new Date(seconds * 1000);
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export function duration(start: number, end: number | null, now = Date.now() / 1000): string {
  if (!start) return "–";
  let s = Math.max(0, Math.round((end ?? now) - start));
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  return h ? `${h}h ${m}m` : m ? `${m}m ${s}s` : `${s}s`;
}

export function metric(value: number | null | undefined): string {
  if (value === null || value === undefined) return "–";
  if (!Number.isFinite(value)) return String(value);
  if (value === 0) return "0";
  const abs = Math.abs(value);
  if (abs >= 1e5 || abs < 1e-4) return value.toExponential(3);
  return Number(value.toPrecision(5)).toString();
}

export function percent(fraction: number): string {
  return `${Math.round(Math.max(0, Math.min(1, fraction)) * 100)}%`;
}

export function bytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i ? v.toFixed(1) : v} ${units[i]}`;
}

export function stateLabel(state: State | string): string {
  return state.replace(/^STATE_/, "").replace(/_/g, " ").toLowerCase();
}

export function value(v: unknown): string {
  if (typeof v === "number") return metric(v);
  if (typeof v === "string") return v;
  return JSON.stringify(v);
}
