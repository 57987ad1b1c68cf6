"""The CDC view in the Airflow UI: pages and JSON served by Airflow's API server (:mod:`cdclake_airflow.view.app`)."""
