"""OTLP histograms and summaries as Prometheus samples (broker/metrics/otlp.py), and the
exposition-line bound on what one push keeps (client_metrics._bounded).

Invariants: OTLP's per-bucket counts become cumulative ``le`` buckets ending at
``+Inf``; cumulative temporality is a histogram, delta a gauge histogram; a point whose
counts do not fit its bounds, or with more than MAX_BUCKETS buckets, is skipped and the
others are kept; a summary keeps its quantiles; a push keeps the samples that fit in
MAX_SAMPLES_PER_INSTANCE lines, a histogram counting one line per bucket and two more.
"""
from __future__ import annotations

from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AggregationTemporality,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricsData,
    ResourceMetrics,
    ScopeMetrics,
    Summary,
    SummaryDataPoint,
)

from broker.metrics import otlp
from broker.metrics.client_metrics import MAX_SAMPLES_PER_INSTANCE, _bounded

CUMULATIVE = AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
DELTA = AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA


def payload(*metrics: Metric) -> bytes:
    return MetricsData(resource_metrics=[ResourceMetrics(scope_metrics=[
        ScopeMetrics(metrics=list(metrics))])]).SerializeToString()


def histogram(name: str, temporality: int, *points: HistogramDataPoint) -> Metric:
    return Metric(name=name, histogram=Histogram(data_points=list(points),
                                                 aggregation_temporality=temporality))


def test_buckets_become_cumulative_and_bad_points_are_skipped():
    good = HistogramDataPoint(count=6, sum=9.5, bucket_counts=[3, 2, 1],
                              explicit_bounds=[1.0, 2.5])
    misfit = HistogramDataPoint(count=1, sum=1.0, bucket_counts=[1], explicit_bounds=[1.0])
    huge = HistogramDataPoint(count=0, bucket_counts=[0] * (otlp.MAX_BUCKETS + 1),
                              explicit_bounds=[float(i) for i in range(otlp.MAX_BUCKETS)])
    bare = HistogramDataPoint(count=4, sum=2.0)
    samples = otlp.decode(payload(histogram("a.b", CUMULATIVE, good, misfit, huge, bare),
                                  histogram("a.d", DELTA, good)))
    assert [(s.kind, s.name, s.count, s.value, s.buckets) for s in samples] == [
        (otlp.HISTOGRAM, "a_b", 6.0, 9.5, (("1.0", 3.0), ("2.5", 5.0), ("+Inf", 6.0))),
        (otlp.HISTOGRAM, "a_b", 4.0, 2.0, (("+Inf", 4.0),)),
        (otlp.GAUGE_HISTOGRAM, "a_d", 6.0, 9.5, (("1.0", 3.0), ("2.5", 5.0), ("+Inf", 6.0)))]


def test_summaries_keep_their_quantiles():
    point = SummaryDataPoint(count=3, sum=7.0, quantile_values=[
        SummaryDataPoint.ValueAtQuantile(quantile=0.5, value=2.0),
        SummaryDataPoint.ValueAtQuantile(quantile=1.0, value=4.0)])
    [sample] = otlp.decode(payload(Metric(name="s", summary=Summary(data_points=[point]))))
    assert (sample.kind, sample.count, sample.value, sample.buckets) == \
        (otlp.SUMMARY, 3.0, 7.0, (("0.5", 2.0), ("1.0", 4.0)))


def test_a_push_keeps_what_fits_in_the_exposition_bound():
    wide = otlp.Sample(otlp.HISTOGRAM, "h", (), 1.0, 1.0, (("+Inf", 1.0),) * 98)  # 100 lines
    gauge = otlp.Sample(otlp.GAUGE, "g", (), 1.0)
    kept = _bounded([wide] * (MAX_SAMPLES_PER_INSTANCE // 100) + [gauge, wide])
    assert kept == [wide] * (MAX_SAMPLES_PER_INSTANCE // 100)
    assert _bounded([gauge] * (MAX_SAMPLES_PER_INSTANCE + 5)) == \
        [gauge] * MAX_SAMPLES_PER_INSTANCE
