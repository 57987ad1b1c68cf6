"""Constants shared by the Kafka Connect client tests."""

#: The fake Connect REST API the tests mock (requests-mock; no worker is contacted).
URL = "http://connect.test:8083"
