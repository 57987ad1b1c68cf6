"""cdclake Airflow hooks."""
