// "30d", "12h", "15m", "90s", "1w" to milliseconds; null if it is not one of those.
const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

export function parseDuration(text: string): number | null {
  const match = /^(\d{1,9})\s*([smhdw])$/.exec(text.trim());
  if (!match || Number(match[1]) === 0) return null;
  return Number(match[1]) * UNIT_MS[match[2]];
}
