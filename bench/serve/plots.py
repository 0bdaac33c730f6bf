"""PNG plots of one or more results files (matplotlib, Debian's python3-matplotlib, imported lazily)."""
from report import rows


def engine_label(result):
    e = result['engine']
    return f'{e["name"]} {e.get("version") or e.get("commit") or ""}'.strip()


def plot_throughput(results, path):
    """Per workload, one bar per results file (engine): single-client decode tok/s, then total output tok/s
    at each client count, one panel each."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    levels = sorted({level for r in results for _, level, _ in rows(r)})
    names = []
    for r in results:
        for w, _, _ in rows(r):
            if w['name'] not in names:
                names.append(w['name'])
    panels = ([('decode_tps', 1, '1 client: decode tok/s (median request)')] if 1 in levels else []) + [
        ('output_tps', level, f'{level} client{"s" if level > 1 else ""}: total output tok/s') for level in levels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(max(8, 1.1 * len(names)), 3.2 * len(panels)), squeeze=False)
    width = 0.8 / len(results)
    for ax, (figure, level, title) in zip(axes[:, 0], panels):
        for k, r in enumerate(results):
            by = {w['name']: f for w, lv, f in rows(r) if lv == level}
            values = [(by.get(n) or {}).get(figure) or 0 for n in names]
            xs = [i + (k - (len(results) - 1) / 2) * width for i in range(len(names))]
            bars = ax.bar(xs, values, width, label=engine_label(r))
            ax.bar_label(bars, fmt='%.0f', fontsize=7)
        ax.set_title(title, fontsize=10)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=20, ha='right', fontsize=8)
        ax.set_ylabel('tok/s')
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_ttft(results, path):
    """TTFT against prompt length for every single-client request; marker per workload, colour per engine
    (per workload when there is one engine)."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from protocol import REQUEST_FIELDS
    ip, it = REQUEST_FIELDS.index('prompt_tokens'), REQUEST_FIELDS.index('ttft_ms')
    markers = 'osD^v<>pP*Xh'
    fig, ax = plt.subplots(figsize=(8, 5))
    names = []
    for k, r in enumerate(results):
        for w in r['workloads']:
            level = w['levels'].get('1')
            if not level or 'runs' not in level:
                continue
            if w['name'] not in names:
                names.append(w['name'])
            points = [(q[ip], q[it]) for run in level['runs'] for q in run['requests'] if q[ip] and q[it]]
            if points:
                colour = f'C{k}' if len(results) > 1 else f'C{names.index(w["name"]) % 10}'
                ax.scatter([p[0] for p in points], [p[1] for p in points], color=colour,
                           marker=markers[names.index(w['name']) % len(markers)], s=22, alpha=0.75,
                           label=f'{engine_label(r)}: {w["name"]}')
    ax.set_xlabel('prompt tokens (usage)')
    ax.set_ylabel('TTFT ms (1 client)')
    ax.set_yscale('log')
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    ax.set_title('Time to first token vs prompt length', fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
