"""A PySpark pipeline on Raftwood, with Spark's own Kafka connector, unmodified.

Copy this file.  It shows the three things a Spark job does with Kafka:

* a structured-streaming query that reads a topic (``readStream.format("kafka")``,
  ``subscribe``, ``startingOffsets=earliest``), counts records by key, and writes the
  counts to another topic with Spark's Kafka sink (``writeStream.format("kafka")``);
* a batch read (``spark.read.format("kafka")``) between explicit offsets, and a batch
  write (``df.write.format("kafka")``);
* a check that every partition's offsets are dense (no gap, no duplicate).

Raftwood needs nothing special: the connector's Java client (kafka-clients 3.9 in
Spark 4.0) talks to it as to Kafka, including its idempotent producer (the sink's
default) and its group-less consumer (the source assigns partitions itself and keeps
offsets in the query's checkpoint, never in Kafka).

What you need: ``pip install pyspark==4.0.*`` (or ``pip install raftwood[spark]``), Java
17+, and the connector ``org.apache.spark:spark-sql-kafka-0-10_2.13:<pyspark version>``,
which is published on Maven Central only (not on PyPI).  ``connector_conf()`` picks:

* ``RAFTWOOD_SPARK_JARS=/path/to/jars`` (or ``--jars``): every ``*.jar`` in that folder
  goes to ``spark.jars`` (offline use).  The folder needs the connector and what it depends on:
  ``spark-sql-kafka-0-10_2.13-<v>.jar``, ``spark-token-provider-kafka-0-10_2.13-<v>.jar``,
  ``kafka-clients-3.9.0.jar`` and ``commons-pool2-2.12.*.jar``;
* otherwise ``spark.jars.packages`` with the coordinates above, which Spark resolves
  from Maven Central (or the mirror your ``spark.jars.ivySettings`` names).

Security settings of the Java client (``security.protocol``, ``sasl.mechanism``,
``sasl.jaas.config``, ``ssl.truststore.type=PEM``, ...) go to ``kafka_options``, which
adds Spark's ``kafka.`` prefix.

Run it against a broker (``raftwood start`` or ``make run``)::

    python compat/spark/pipeline.py --bootstrap 127.0.0.1:9092 \\
        --source events --sink event-counts --checkpoint /tmp/event-counts-ckpt
"""
from __future__ import annotations

import argparse
import glob
import os
import sys

KAFKA_CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13"
CONNECTOR_JAR_PREFIX = "spark-sql-kafka-0-10_2.13-"
JARS_ENV = "RAFTWOOD_SPARK_JARS"


class ConnectorMissing(RuntimeError):
    """The folder named by RAFTWOOD_SPARK_JARS has no spark-sql-kafka jar."""


def connector_conf(jars_dir: str | None = None, spark_version: str | None = None) -> dict:
    """Spark settings that put the Kafka connector on the classpath (see the docstring)."""
    jars_dir = jars_dir or os.environ.get(JARS_ENV)
    if jars_dir:
        jars = sorted(glob.glob(os.path.join(jars_dir, "*.jar")))
        if not any(os.path.basename(j).startswith(CONNECTOR_JAR_PREFIX) for j in jars):
            raise ConnectorMissing(f"{jars_dir} has no {CONNECTOR_JAR_PREFIX}*.jar")
        return {"spark.jars": ",".join(jars)}
    if spark_version is None:
        import pyspark
        spark_version = pyspark.__version__
    return {"spark.jars.packages": f"{KAFKA_CONNECTOR}:{spark_version}"}


def make_session(app_name: str = "raftwood-pipeline", *, master: str = "local[2]",
                 connector: dict | None = None, extra_conf: dict | None = None):
    """A local SparkSession (small shuffles, no UI) with the Kafka connector of
    ``connector`` (default: ``connector_conf()``; ``{}``: none)."""
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.appName(app_name).master(master)
               .config("spark.sql.shuffle.partitions", "3")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true"))
    connector = connector_conf() if connector is None else connector
    for key, value in {**connector, **(extra_conf or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


# -- the transformation: pure DataFrame code, testable without Kafka ---------------------------

def counts_by_key(records):
    """Kafka records (key, value, ...) -> (key, value) rows: the key and how many records
    carry it, both as strings, ready for the Kafka sink."""
    from pyspark.sql import functions as F

    counts = records.select(F.col("key").cast("string").alias("key")).groupBy("key").count()
    return counts.select("key", F.col("count").cast("string").alias("value"))


def offset_ranges(records) -> dict[int, tuple[int, int, int]]:
    """{partition: (first offset, last offset, record count)} of Kafka records."""
    from pyspark.sql import functions as F

    rows = (records.groupBy("partition")
            .agg(F.min("offset").alias("first"), F.max("offset").alias("last"),
                 F.count("*").alias("records"), F.countDistinct("offset").alias("distinct"))
            .collect())
    result = {}
    for row in rows:
        if row["distinct"] != row["records"]:
            raise ValueError(f"partition {row['partition']}: an offset appears twice")
        result[row["partition"]] = (row["first"], row["last"], row["records"])
    return result


def check_dense(records) -> dict[int, tuple[int, int, int]]:
    """``offset_ranges``, after checking each partition's offsets run without a gap."""
    ranges = offset_ranges(records)
    for partition, (first, last, count) in sorted(ranges.items()):
        if last - first + 1 != count:
            raise ValueError(f"partition {partition}: {count} records between offsets {first} "
                             f"and {last}: not dense")
    return ranges


def latest_value_per_key(records) -> dict[str, str]:
    """The value of the highest offset for each key (the sink's last update per key; the
    default partitioner keeps one key in one partition)."""
    rows = records.selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value",
                              "partition", "offset").collect()
    latest: dict[str, tuple[int, str]] = {}
    for row in sorted(rows, key=lambda r: (r["partition"], r["offset"])):
        latest[row["key"]] = (row["offset"], row["value"])
    return {key: value for key, (_, value) in latest.items()}


# -- Kafka in and out -------------------------------------------------------------------------

def _with_options(reader_or_writer, bootstrap: str, kafka_options: dict | None):
    """``kafka.bootstrap.servers`` and the Java client's settings (``security.protocol``,
    ``sasl.jaas.config``, ...; the ``kafka.`` prefix is added) on a reader or writer."""
    reader_or_writer = reader_or_writer.option("kafka.bootstrap.servers", bootstrap)
    for key, value in (kafka_options or {}).items():
        reader_or_writer = reader_or_writer.option(f"kafka.{key}", value)
    return reader_or_writer


def passthrough(records):
    """Kafka records -> (key, value) rows as they are: a topic copied to another."""
    return records.select("key", "value")


def start_counts_query(spark, bootstrap: str, source: str, sink: str, checkpoint: str, *,
                       available_now: bool = True, transform=counts_by_key,
                       kafka_options: dict | None = None):
    """Stream ``source`` -> ``transform`` (counts by key) -> ``sink``.  With
    ``available_now`` the query processes what the topic holds when it starts and stops
    (run it again later: it goes on from the offsets in ``checkpoint``); otherwise it runs
    a micro-batch every second until stopped.  ``kafka_options``: the Java client's
    settings for both ends (security), without the ``kafka.`` prefix."""
    records = (_with_options(spark.readStream.format("kafka"), bootstrap, kafka_options)
               .option("subscribe", source)
               .option("startingOffsets", "earliest")
               .load())
    writer = (_with_options(transform(records).writeStream.format("kafka"), bootstrap,
                            kafka_options)
              .option("topic", sink)
              .option("checkpointLocation", checkpoint)
              .outputMode("update"))
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime="1 second")
    return writer.start()


def read_topic(spark, bootstrap: str, topic: str, *, kafka_options: dict | None = None):
    """Every record of ``topic`` as a batch DataFrame (earliest to latest offsets)."""
    return (_with_options(spark.read.format("kafka"), bootstrap, kafka_options)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .load())


def write_topic(records, bootstrap: str, topic: str, *, kafka_options: dict | None = None):
    """Spark's batch sink: ``records`` (key, value columns) appended to ``topic``."""
    _with_options(records.write.format("kafka"), bootstrap, kafka_options) \
        .option("topic", topic).save()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--source", default="events")
    parser.add_argument("--sink", default="event-counts")
    parser.add_argument("--checkpoint", default="/tmp/raftwood-event-counts-checkpoint")
    parser.add_argument("--continuous", action="store_true",
                        help="keep the query running (Ctrl-C stops it)")
    parser.add_argument("--jars", default=os.environ.get(JARS_ENV),
                        help=f"a folder of the connector's jars (default: ${JARS_ENV}; "
                             "unset: spark.jars.packages from Maven Central)")
    args = parser.parse_args(argv)
    try:
        connector = connector_conf(args.jars)
    except ConnectorMissing as exc:
        parser.error(str(exc))
    spark = make_session(connector=connector)
    try:
        query = start_counts_query(spark, args.bootstrap, args.source, args.sink,
                                   args.checkpoint, available_now=not args.continuous)
        query.awaitTermination()
        ranges = check_dense(read_topic(spark, args.bootstrap, args.source))
        print(f"{args.source}: offsets dense per partition {ranges}")
        print(f"{args.sink}: {latest_value_per_key(read_topic(spark, args.bootstrap, args.sink))}")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
