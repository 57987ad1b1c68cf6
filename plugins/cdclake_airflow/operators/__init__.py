"""cdclake Airflow operators."""
