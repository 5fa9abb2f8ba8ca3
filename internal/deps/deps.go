// Package deps pins the module's dependencies while the packages that use them are written.
package deps

import (
	_ "github.com/apache/arrow-go/v18/arrow/ipc"
	_ "github.com/apache/arrow-go/v18/arrow/csv"
	_ "github.com/apache/arrow-go/v18/parquet/pqarrow"
	_ "github.com/apache/arrow-go/v18/arrow/compute"
	_ "github.com/nats-io/nats-server/v2/server"
	_ "github.com/nats-io/nats.go/jetstream"
	_ "github.com/oklog/run"
	_ "github.com/pganalyze/pg_query_go/v6"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/vmihailenco/msgpack/v5"
	_ "golang.org/x/sys/unix"
)
