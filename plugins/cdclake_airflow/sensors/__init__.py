"""cdclake Airflow sensors."""
