// Command woodpecker-standin serves package woodpeckerapi: the agent's
// gRPC API on -grpc and the suite's JSON control on -http, both loopback.
package main

import (
	"flag"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/runnerguard/runnerguard/e2e/fleets/woodpeckerapi"
)

func main() {
	grpcAddr := flag.String("grpc", "127.0.0.1:9000", "the agents' gRPC address (WOODPECKER_SERVER)")
	httpAddr := flag.String("http", "127.0.0.1:9001", "the suite's control address")
	token := flag.String("agent-token", os.Getenv("WOODPECKER_AGENT_SECRET"), "the agent token accepted")
	flag.Parse()
	if *token == "" {
		log.Fatal("an agent token is needed (-agent-token or WOODPECKER_AGENT_SECRET)")
	}
	s := woodpeckerapi.New(*token)
	g := grpc.NewServer(grpc.UnaryInterceptor(s.Interceptor()))
	s.Register(g)
	gl, err := net.Listen("tcp", *grpcAddr)
	if err != nil {
		log.Fatal(err)
	}
	hl, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		log.Fatal(err)
	}
	go func() { log.Fatal(g.Serve(gl)) }()
	go func() { log.Fatal((&http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}).Serve(hl)) }()
	log.Printf("woodpecker stand-in: gRPC on %s, control on %s", gl.Addr(), hl.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	g.Stop()
}
