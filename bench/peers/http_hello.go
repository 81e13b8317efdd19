// The Go peer of samples/http_server for bench/netbench.sh: net/http
// answering "Hello, World!" on "/", standard library only; HTTPS with -cert
// and -key.
//
//	go run http_hello.go -port 8081 [-cert server.pem -key server.key]
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
)

func main() {
	port := flag.Int("port", 8081, "port")
	cert := flag.String("cert", "", "PEM certificate chain: serve HTTPS (with -key)")
	key := flag.String("key", "", "PEM private key")
	flag.Parse()
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("Hello, World!"))
	})
	if *cert != "" {
		http.ServeTLS(ln, nil, *cert, *key)
		return
	}
	http.Serve(ln, nil)
}
