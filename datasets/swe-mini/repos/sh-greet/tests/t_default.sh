[ "$(sh greet.sh)" = "Hello, world" ]
