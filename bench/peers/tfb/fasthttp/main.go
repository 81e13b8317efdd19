// The fasthttp peer of samples/tfb_server (bench/tfbbench.sh): the six
// TechEmpower test types on valyala/fasthttp, database/sql and lib/pq.
//
//	tfb_fasthttp -port 8082 -db "host=127.0.0.1 …" -pool 16
package main

import (
	"github.com/valyala/fasthttp"

	"tfbpeer/world"
)

func main() {
	db, ln := world.Start(8082)
	handler := func(ctx *fasthttp.RequestCtx) {
		count := func() int { return world.Count(string(ctx.QueryArgs().Peek("queries"))) }
		var rows []world.Row
		var err error
		switch string(ctx.Path()) {
		case "/plaintext":
			ctx.SetContentType("text/plain")
			ctx.WriteString("Hello, World!")
			return
		case "/json":
			ctx.SetContentType("application/json")
			ctx.Write(world.JSON(map[string]string{"message": "Hello, World!"}))
			return
		case "/fortunes":
			ctx.SetContentType("text/html; charset=utf-8")
			err = db.Fortunes(ctx)
		case "/db":
			if rows, err = db.Rows(1); err == nil {
				ctx.SetContentType("application/json")
				ctx.Write(world.JSON(rows[0]))
			}
		case "/queries":
			if rows, err = db.Rows(count()); err == nil {
				ctx.SetContentType("application/json")
				ctx.Write(world.JSON(rows))
			}
		case "/updates":
			if rows, err = db.Update(count()); err == nil {
				ctx.SetContentType("application/json")
				ctx.Write(world.JSON(rows))
			}
		default:
			ctx.Error("Not Found", fasthttp.StatusNotFound)
			return
		}
		if err != nil {
			ctx.ResetBody()
			ctx.Error(err.Error(), fasthttp.StatusInternalServerError)
		}
	}
	s := &fasthttp.Server{Handler: handler, Name: "fasthttp"}
	s.Serve(ln)
}
