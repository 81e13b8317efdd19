// The fasthttp peer of samples/http_server for bench/netbench.sh:
// valyala/fasthttp answering "Hello, World!" on "/".
//
//	fasthttp_hello -port 8086
package main

import (
	"flag"
	"fmt"
	"net"
	"os"

	"github.com/valyala/fasthttp"
)

func main() {
	port := flag.Int("port", 8086, "port")
	flag.Parse()
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	fasthttp.Serve(ln, func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) != "/" {
			ctx.Error("Not Found", fasthttp.StatusNotFound)
			return
		}
		ctx.SetContentType("text/plain")
		ctx.WriteString("Hello, World!")
	})
}
