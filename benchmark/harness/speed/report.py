"""The speed harness's results as markdown: the paper's Table 3 form for the family's bare steps,
one row per pipeline configuration and method, and a line per evaluation part."""
from typing import List, Optional

from benchmark.harness.speed.demo import demo_table
from benchmark.harness.speed.floor import NO_PEAK, peak_line
from benchmark.harness.speed.loop import loop_line
from benchmark.harness.speed.step import METHODS, PAIRS
from benchmark.harness.speed.timing import Settings


def _share(value: Optional[float]) -> str:
    return 'n/a' if value is None else f'{100 * value:.1f}%'


def header(result: dict, s: Settings) -> List[str]:
    setting = (f'ResNet-{s.depth}{" (small stem)" if s.small_stem else ""}, {s.input_size} px, '
               f'batch {s.batch} per process')
    lines = [f'{"Paper setting" if s.paper else "Speed and memory"}: {setting}; '
             f'{result["device"]}.', '']
    load = result.get('load_average') or {}
    if load.get('start') and load.get('end'):
        lines[-1:] = [f'Host load average (1, 5, 15 min) at start {load["start"]}, at end '
                      f'{load["end"]}.', '']
    if result.get('partial'):
        lines[-1:] = [f'Partial: written after {result["partial"]["done"]}; the parts below are '
                      f'complete, the run had not ended (or was stopped).', '']
    peaks = list(result.get('peak_tflops') or ('bf16', 'fp32'))
    lines += [f'Peak: {peak_line(result.get("device_name", "cpu"), peaks)}.',
              f'Peak memory: {result["memory_kind"]}.', '']
    return lines


def steps_table(result: dict, s: Settings) -> List[str]:
    lines = [f'Bare steps ({s.precision}{", channels_last" if s.channels_last else ""}); floors '
             f'are the time ratio the counting model (passes) and FlopCounterMode (FLOPs) predict:',
             '', '| Method | Baseline | Time/step (ms) | Images/s | GFLOP/image | TFLOP/s | Of peak '
             '| Peak memory (MiB) | Time vs baseline | Floor (passes) | Floor (FLOPs) '
             '| Memory vs baseline |', '|---' * 12 + '|']
    pair_of = {new: (pair, base) for pair, (new, base) in PAIRS.items()}
    for m, label in METHODS.items():
        r = result['steps'][m]
        pair, base = pair_of.get(m, (None, None))
        ratios = ([1.0] * 4 if pair is None else
                  [result[f'{pair}_{k}'] for k in ('time_ratio', 'floor_passes', 'floor_flops',
                                                   'memory_ratio')])
        lines.append(f'| {label} | {METHODS[base] if base else "-"} '
                     f'| {1e3 * r["seconds_per_step"]:.1f} | {r["images_per_s"]:.1f} '
                     f'| {r["flops_per_image"] / 1e9:.3g} | {r["tflops"]:.3g} '
                     f'| {_share(r["peak_fraction"])} | {r["peak_bytes"] / 2**20:.1f} | '
                     + ' | '.join(f'{v:.2f}' for v in ratios) + ' |')
    return lines


def pipeline_table(result: dict) -> List[str]:
    lines = ['Pipeline (mmengine Runner, images decoded and augmented by the loader, hooks on):',
             '', '| Configuration | Method | Images/s | Bare step images/s | Efficiency '
             '| Waiting for data | Time vs MoCo-v2 | Memory vs MoCo-v2 | TFLOP/s | Of peak '
             '| Bound |', '|---' * 11 + '|']
    for name, c in result['pipeline'].items():
        for m, p in c['methods'].items():
            ratios = (1.0, 1.0) if m == 'mocov2' else (c['time_ratio'], c['memory_ratio'])
            tflops = f'{p["tflops"]:.3g}' if 'tflops' in p else 'n/a'
            lines.append(f'| {name} | {METHODS[m]} | {p["median_images_per_s"]:.1f} '
                         f'| {p["median_bare_images_per_s"]:.1f} | {p["median_efficiency"]:.2f} '
                         f'| {_share(p["median_data_wait_fraction"])} | {ratios[0]:.2f} '
                         f'| {ratios[1]:.2f} | {tflops} | {_share(p.get("peak_fraction"))} '
                         f'| {p["bound"]} |')
    return lines


def breakdown_table(result: dict) -> List[str]:
    """Per configuration and method: where an iteration's time goes, and what it asks of the
    device (benchmark/harness/speed/breakdown.py)."""
    lines = ['Per iteration (ms; views, step and hooks on the device\'s timeline, rest = the '
             'wall time none of them explains: host work the device waited for), the host\'s '
             'waits for the device over the timed iterations (CUDA), and one further '
             'iteration\'s aten operations and host reads; of the loader wait, the host time '
             'spent drawing the next batch\'s views where they are drawn one ahead:', '',
             '| Configuration | Method | Wall | Loader wait | of which views ahead | Views | Step '
             '| Hooks | Rest | Host syncs | Aten ops | Host reads |', '|---' * 12 + '|']
    for name, c in result['pipeline'].items():
        for m, p in c['methods'].items():
            b = p.get('breakdown')
            if not b:
                continue
            ms, counted = b['ms'], b.get('counted_iteration') or {}
            syncs = 'n/a' if b.get('host_syncs') is None else b['host_syncs']
            lines.append(f'| {name} | {METHODS[m]} | {ms["wall"]:.1f} | {ms["wait"]:.1f} '
                         f'| {ms.get("prepare", 0.0):.1f} | {ms["views"]:.1f} '
                         f'| {ms["step"]:.1f} | {ms["hooks"]:.1f} | {ms["rest"]:.1f} | {syncs} '
                         f'| {counted.get("aten_ops", "n/a")} '
                         f'| {counted.get("host_reads", "n/a")} |')
    return lines


def graph_table(result: dict) -> List[str]:
    """Per configuration and method on a GPU: the bare step as the Runner's optimizer wrapper
    takes it, the whole step (`whole_step`) eager and replayed from one CUDA graph."""
    rows = [(name, m, p) for name, c in result['pipeline'].items()
            for m, p in c['methods'].items() if 'graph_images_per_s' in p or 'graph_error' in p]
    if not rows:
        return []
    lines = ['Whole step as one CUDA graph (benchmark/engine/step_graph.py; images/s on the last '
             'batch, loader idle; speed-up = paired median of graph / bare step):', '',
             '| Configuration | Method | Bare step | Whole step, eager | Whole step, graph '
             '| Speed-up |', '|---' * 6 + '|']
    for name, m, p in rows:
        if 'graph_error' in p and 'graph_images_per_s' not in p:
            lines.append(f'| {name} | {METHODS[m]} | {p["median_bare_images_per_s"]:.1f} '
                         f'| capture failed: {p["graph_error"]} | | |')
            continue
        lines.append(f'| {name} | {METHODS[m]} | {p["median_bare_images_per_s"]:.1f} '
                     f'| {p["median_whole_images_per_s"]:.1f} '
                     f'| {p["median_graph_images_per_s"]:.1f} | {p["graph_speedup"]:.2f} |')
    return lines + ['']


def paper_line(result: dict) -> str:
    share = result['paper_setting_peak_fraction']
    peak = NO_PEAK if share is None else (
        f'{100 * share:.1f}% of the device peak, which would allow '
        f'{result["paper_setting_floor_images_per_s"]:.0f} images/s')
    return (f'Paper setting, fastest configuration {result["paper_setting_config"]}: MixCo '
            f'{result["paper_setting_images_per_s"]:.1f} source images/s end to end '
            f'(MoCo-v2 {result["paper_setting_mocov2_images_per_s"]:.1f}), waiting for data '
            f'{_share(result["paper_setting_data_wait"])}, bound: {result["paper_setting_bound"]}; '
            f'MixCo / MoCo-v2 time {result["paper_setting_time_ratio"]:.2f}, memory '
            f'{result["paper_setting_memory_ratio"]:.2f}; {result["paper_setting_tflops"]:.3g} '
            f'TFLOP/s ({peak}).')


def views_line(v: dict) -> str:
    ms = v['ms_per_batch']
    kornia = 'not installed' if ms['kornia'] is None else f'{ms["kornia"]:.1f} ms'
    more = [f'{ms[key]:.1f} ms {name}' for key, name in (('device_path_graphed', 'graphed'),
                                                          ('device_path_compiled', 'compiled'))
            if ms.get(key) is not None]
    compiled = f' ({", ".join(more)})' if more else ''
    return (f'Views ({v["batch"]} images {v["native"]} px -> 2 views {v["size"]} px, '
            f'{v["device"]}): device path {ms["device_path"]:.1f} ms per batch{compiled}, PIL '
            f'image by image {ms["pil_per_image"]:.1f} ms (one worker), kornia {kornia}.')


def features_line(f: dict) -> str:
    """Feature extraction's images/s and, where measured, its two halves alone."""
    line = f'Feature extraction: {f["images_per_s"]:.1f} images/s'
    if 'forward_images_per_s' in f:
        line += (f' (ResNet-{f["depth"]}, {f["input_size"]} px, batch {f["batch"]}, '
                 f'{f["workers"]} loader workers, {f["torch_threads"]} threads, {f["device"]}); '
                 f'reading the batches alone {f["read_images_per_s"]:.1f}, the forward pass '
                 f'alone {f["forward_images_per_s"]:.1f}')
    return line + '.'


def markdown(result: dict, s: Settings) -> str:
    """Every part present in the result, as tables and lines."""
    lines = header(result, s)
    if 'steps' in result:
        lines += steps_table(result, s) + ['']
    if 'pipeline' in result:
        lines += pipeline_table(result) + ['']
        lines += breakdown_table(result) + ['']
        lines += graph_table(result)
    if 'paper_setting_config' in result:
        lines += [paper_line(result), '']
    if 'loop' in result:
        lines += [loop_line(result['loop'], s), '']
    if 'features' in result:
        lines += [features_line(result['features']), '']
    if 'knn' in result:
        k = result['knn']
        lines += [f'kNN ({k["queries"]} queries, bank {k["bank"]} x {k["dim"]}, k={k["k"]}, '
                  f'{k["classes"]} classes, {k["device"]}): faiss {k["median_faiss_s"]:.3g} s, '
                  f'lightly {k["median_lightly_s"]:.3g} s, matmul {k["median_matmul_s"]:.3g} s '
                  f'({k["matmul_gflops"]:.0f} GFLOP/s); '
                  f'top-1 equal {k["top1_equal_fraction"]:.4f}.', '']
    if 'views' in result:
        lines += [views_line(result['views']), '']
    if 'demo' in result:
        lines += demo_table(result['demo']) + ['']
    return '\n'.join(lines).rstrip('\n') + '\n'
