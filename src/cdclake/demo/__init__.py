"""The demo: the shop schema and workload on the stack's databases, and the pipeline run through Airflow.

* :mod:`cdclake.demo.database`: the application's view of the demo databases, the demo schema;
* :mod:`cdclake.demo.workload`: the shop workload (and a small one of the tests);
* :mod:`cdclake.demo.topics`: Kafka topic helpers of the demo, the tests and the fixture scripts;
* :mod:`cdclake.demo.pipeline`: ``cdclake demo`` end to end through Airflow.
"""
