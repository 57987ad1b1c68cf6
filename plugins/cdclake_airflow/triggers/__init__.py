"""cdclake Airflow triggers."""
