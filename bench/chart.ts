/**
 * A grouped bar chart as a standalone SVG: one group per pair, one bar per server, req/s on the y axis. Written by
 * the bench next to a result's JSON (report.ts), so BENCHMARKS.md can show the pairs rather than only list them.
 */

interface ChartBar {
  readonly series: string;
  readonly value: number;
}

export interface ChartData {
  readonly title: string;
  readonly subtitle: string;
  readonly unit: string;
  readonly groups: ReadonlyArray<{ readonly label: string; readonly bars: readonly ChartBar[] }>;
}

/** Colours per series, in the order servers run; unknown series take the last. */
const COLOURS: Readonly<Record<string, string>> = {
  ceiling: '#8c8c8c',
  'app-only': '#4c78a8',
  baseline: '#f2a541',
  plantstore: '#2e9b5f',
  // --workers: WORKERS=1 is plantstore as it runs by default; WORKERS=N takes the last colour.
  'WORKERS=1': '#2e9b5f',
};
const FALLBACK_COLOUR = '#b279a2';

const WIDTH = 760;
const HEIGHT = 380;
const MARGIN = { top: 64, right: 24, bottom: 56, left: 72 };

function escapeXml(text: string): string {
  return text.replace(/[<>&"']/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&apos;' })[c] as string);
}

/** A round step for about five gridlines up to `max`: 1, 2 or 5 times a power of ten. */
function gridStep(max: number): number {
  const rough = max / 5;
  const power = 10 ** Math.floor(Math.log10(rough));
  const multiple = [1, 2, 5, 10].find((m) => m * power >= rough) ?? 10;
  return multiple * power;
}

const formatValue = (value: number) => (value >= 10_000 ? `${(value / 1000).toFixed(1)}k` : String(Math.round(value)));

export function renderBarChart(data: ChartData): string {
  const series = [...new Set(data.groups.flatMap((group) => group.bars.map((bar) => bar.series)))];
  const max = Math.max(1, ...data.groups.flatMap((group) => group.bars.map((bar) => bar.value)));
  const step = gridStep(max);
  const top = Math.ceil(max / step) * step;
  const plotWidth = WIDTH - MARGIN.left - MARGIN.right;
  const plotHeight = HEIGHT - MARGIN.top - MARGIN.bottom;
  const y = (value: number) => MARGIN.top + plotHeight - (value / top) * plotHeight;
  const groupWidth = plotWidth / Math.max(1, data.groups.length);
  const barWidth = Math.min(48, (groupWidth * 0.8) / Math.max(1, series.length));

  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="sans-serif" font-size="12">`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="#ffffff"/>`,
    `<text x="${MARGIN.left}" y="22" font-size="15" font-weight="bold">${escapeXml(data.title)}</text>`,
    `<text x="${MARGIN.left}" y="40" fill="#555555">${escapeXml(data.subtitle)}</text>`,
  ];
  for (let value = 0; value <= top; value += step) {
    parts.push(
      `<line x1="${MARGIN.left}" x2="${WIDTH - MARGIN.right}" y1="${y(value)}" y2="${y(value)}" stroke="#e0e0e0"/>`,
      `<text x="${MARGIN.left - 8}" y="${y(value) + 4}" text-anchor="end" fill="#555555">${formatValue(value)}</text>`,
    );
  }
  parts.push(
    `<text transform="translate(16 ${MARGIN.top + plotHeight / 2}) rotate(-90)" text-anchor="middle" fill="#555555">${escapeXml(data.unit)}</text>`,
  );
  data.groups.forEach((group, g) => {
    const left = MARGIN.left + g * groupWidth + (groupWidth - barWidth * series.length) / 2;
    for (const bar of group.bars) {
      const x = left + series.indexOf(bar.series) * barWidth;
      const colour = COLOURS[bar.series] ?? FALLBACK_COLOUR;
      parts.push(
        `<rect x="${x.toFixed(1)}" y="${y(bar.value).toFixed(1)}" width="${(barWidth - 2).toFixed(1)}" height="${(MARGIN.top + plotHeight - y(bar.value)).toFixed(1)}" fill="${colour}"><title>${escapeXml(`${group.label} ${bar.series}: ${Math.round(bar.value)} ${data.unit}`)}</title></rect>`,
        `<text x="${(x + (barWidth - 2) / 2).toFixed(1)}" y="${(y(bar.value) - 4).toFixed(1)}" text-anchor="middle" font-size="10">${formatValue(bar.value)}</text>`,
      );
    }
    parts.push(`<text x="${(MARGIN.left + g * groupWidth + groupWidth / 2).toFixed(1)}" y="${HEIGHT - MARGIN.bottom + 18}" text-anchor="middle">${escapeXml(group.label)}</text>`);
  });
  let legendX = MARGIN.left;
  for (const name of series) {
    parts.push(
      `<rect x="${legendX}" y="${HEIGHT - 22}" width="12" height="12" fill="${COLOURS[name] ?? FALLBACK_COLOUR}"/>`,
      `<text x="${legendX + 16}" y="${HEIGHT - 12}">${escapeXml(name)}</text>`,
    );
    legendX += 24 + name.length * 7;
  }
  parts.push('</svg>', '');
  return parts.join('\n');
}
