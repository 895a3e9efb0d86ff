"""What a row's runs cost beside their accuracy, read from their records: time per epoch and
peak memory (measured during training), encoder passes and GFLOP per training image (one
training step counted when the run was evaluated, kept in the record's ``extra.compute`` by
benchmark/evaluation/step_cost.py), the run's total training compute (that step's FLOPs per
image times the images it trained on, and its device-seconds: the wall time of its training
epochs times its processes) and the hardware they ran on (the records' ``host``). Records
written before a count existed have none: their rows leave it empty ('not counted')."""
from __future__ import annotations

from typing import Any, Dict, Iterable, Optional


def number(value: Any) -> Optional[float]:
    """A record's number as a float; None for anything else (None, an NA string, a bool)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def mean(values: Iterable[Any]) -> Optional[float]:
    """The mean of the numbers among `values` (None where there is none)."""
    numbers = [v for v in (number(x) for x in values) if v is not None]
    return sum(numbers) / len(numbers) if numbers else None


def record_compute(record: Dict[str, Any]) -> Dict[str, Optional[float]]:
    """Encoder passes (forward passes through the encoders per training image, with a gradient
    or without) and GFLOP per training image of one training step (forward and backward), as
    the record holds them; None where it holds no count."""
    compute = (record.get('extra') or {}).get('compute') or {}
    flops = number(compute.get('flops_per_image'))
    return dict(encoder_passes=number(compute.get('encoder_passes')),
                gflop_per_image=None if flops is None else flops / 1e9,
                train_flops=number(compute.get('train_flops')),
                device_seconds=number(compute.get('device_seconds')))


def regime_free(overrides: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """A run's overrides without those that set its epochs and learning-rate schedule (what a
    suite's run at its budget adds to its config's), so its rows meet the same config's at
    equal epochs."""
    return {k: v for k, v in (overrides or {}).items()
            if k != 'train_cfg.max_epochs' and not k.startswith('param_scheduler')}


FLOP_UNITS = (('EFLOP', 1e18), ('PFLOP', 1e15), ('TFLOP', 1e12), ('GFLOP', 1e9))


def flop_text(flops: Optional[float]) -> str:
    """'5.43 TFLOP' (three significant digits, the largest unit under the number; 'not counted'
    for None)."""
    if flops is None:
        return 'not counted'
    unit, size = next(((u, s) for u, s in FLOP_UNITS if flops >= s), FLOP_UNITS[-1])
    return f'{flops / size:.3g} {unit}'


def compute_text(row: Dict[str, Any]) -> str:
    """A row's training compute for a table: '5.43 TFLOP, 812 device-s' ('not counted' where its
    records hold no count)."""
    flops, seconds = row.get('train_flops'), row.get('device_seconds')
    if flops is None:
        return 'not counted'
    return flop_text(flops) + (f', {seconds:.0f} device-s' if seconds is not None else '')


def host_text(host: Dict[str, Any]) -> str:
    """'cpu (Intel Xeon, 2 cores)', 'cuda:NVIDIA H100 80GB HBM3 (AMD EPYC, 16 cores)' ('1 of 2
    cores' for a run given a share of the machine) from a record's ``host``."""
    device = str(host.get('device') or 'unknown device')
    cores, machine = host.get('cpu_cores'), host.get('machine_cores')
    share = cores and (f'{cores} of {machine} cores' if machine and machine != cores
                       else f'{cores} cores')
    extra = ', '.join(str(x) for x in (host.get('cpu'), share) if x)
    return f'{device} ({extra})' if extra else device


def row_compute(records: Iterable[Dict[str, Any]]) -> Dict[str, Any]:
    """A row's means over its records of time per epoch, peak memory, encoder passes, GFLOP
    per training image, training FLOPs and device-seconds (None where no record has one), and
    the hardware of its records
    ('; ' between distinct ones; '' for stand-ins without a host)."""
    records = list(records)
    counts = [record_compute(r) for r in records]
    return dict(time_s_per_epoch=mean(r.get('time_s_per_epoch') for r in records),
                peak_memory_gb=mean(r.get('peak_memory_gb') for r in records),
                encoder_passes=mean(c['encoder_passes'] for c in counts),
                gflop_per_image=mean(c['gflop_per_image'] for c in counts),
                train_flops=mean(c['train_flops'] for c in counts),
                device_seconds=mean(c['device_seconds'] for c in counts),
                hardware='; '.join(dict.fromkeys(host_text(r['host']) for r in records
                                                 if r.get('host'))))
