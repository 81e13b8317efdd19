// The fasthttp peer of samples/tfb_server (bench/tfbbench.sh), written as
// TechEmpower's own fasthttp entry is: valyala/fasthttp, a pgx (v4) pool
// whose statements pgx prepares and caches, encoding/json of structs, and
// the fortunes page compiled by quicktemplate (templates/fortunes.qtpl; tfbbench.sh
// runs qtc). Queries run one at a time, each its own round trip and
// transaction (pgx's Batch would share one Sync, which General Requirement
// #7 forbids for /queries). /updates writes its rows in one statement, as
// samples/tfb_server and the net/http peer do.
//
//	tfb_fasthttp -port 8082 -db "host=127.0.0.1 …" -pool 16
package main

import (
	"context"
	"encoding/json"
	"math/rand"
	"sort"
	"strconv"

	"github.com/jackc/pgx/v4/pgxpool"
	"github.com/valyala/fasthttp"

	"tfbpeer/fasthttp/templates"
	"tfbpeer/world"
)

const (
	worldSelect   = "SELECT id, randomNumber FROM World WHERE id = $1"
	fortuneSelect = "SELECT id, message FROM Fortune"
	worldUpdate   = "UPDATE World SET randomNumber = v.r FROM " +
		"(SELECT unnest($1::int[]) AS id, unnest($2::int[]) AS r ORDER BY 1) AS v WHERE World.id = v.id"
)

var db *pgxpool.Pool

func randomID() int32 { return int32(rand.Intn(10000) + 1) }

func rows(n int) ([]world.Row, error) {
	rs := make([]world.Row, n)
	for i := range rs {
		if err := db.QueryRow(context.Background(), worldSelect, randomID()).Scan(&rs[i].ID, &rs[i].RandomNumber); err != nil {
			return nil, err
		}
	}
	return rs, nil
}

func update(n int) ([]world.Row, error) {
	rs, err := rows(n)
	if err != nil {
		return nil, err
	}
	// Each id once in the statement; a repeated id keeps one new number.
	chosen := make(map[int]int, n)
	ids := make([]int32, 0, n)
	numbers := make([]int32, 0, n)
	for i := range rs {
		if v, ok := chosen[rs[i].ID]; ok {
			rs[i].RandomNumber = v
			continue
		}
		rs[i].RandomNumber = int(randomID())
		chosen[rs[i].ID] = rs[i].RandomNumber
		ids = append(ids, int32(rs[i].ID))
		numbers = append(numbers, int32(rs[i].RandomNumber))
	}
	_, err = db.Exec(context.Background(), worldUpdate, ids, numbers)
	return rs, err
}

func fortunes() ([]templates.Fortune, error) {
	r, err := db.Query(context.Background(), fortuneSelect)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	list := make([]templates.Fortune, 0, 16)
	for r.Next() {
		var f templates.Fortune
		if err := r.Scan(&f.ID, &f.Message); err != nil {
			return nil, err
		}
		list = append(list, f)
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	list = append(list, templates.Fortune{ID: 0, Message: "Additional fortune added at request time."})
	sort.Slice(list, func(i, j int) bool { return list[i].Message < list[j].Message })
	return list, nil
}

func handler(ctx *fasthttp.RequestCtx) {
	var body []byte
	var err error
	switch string(ctx.Path()) {
	case "/plaintext":
		ctx.SetContentType("text/plain")
		ctx.SetBodyString("Hello, World!")
		return
	case "/json":
		body, err = json.Marshal(world.Message{Message: "Hello, World!"})
	case "/db":
		var rs []world.Row
		if rs, err = rows(1); err == nil {
			body, err = json.Marshal(rs[0])
		}
	case "/queries":
		var rs []world.Row
		if rs, err = rows(world.Count(string(ctx.QueryArgs().Peek("queries")))); err == nil {
			body, err = json.Marshal(rs)
		}
	case "/updates":
		var rs []world.Row
		if rs, err = update(world.Count(string(ctx.QueryArgs().Peek("queries")))); err == nil {
			body, err = json.Marshal(rs)
		}
	case "/fortunes":
		var list []templates.Fortune
		if list, err = fortunes(); err == nil {
			ctx.SetContentType("text/html; charset=utf-8")
			templates.WriteFortunePage(ctx, list)
			return
		}
	default:
		ctx.Error("Not Found", fasthttp.StatusNotFound)
		return
	}
	if err != nil {
		ctx.Error(err.Error(), fasthttp.StatusInternalServerError)
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

func main() {
	port, conninfo, pool := world.Options(8082)
	var err error
	db, err = pgxpool.Connect(context.Background(), conninfo+" pool_max_conns="+strconv.Itoa(pool))
	world.Check(err)
	s := &fasthttp.Server{Handler: handler, Name: "fasthttp"}
	world.Check(s.Serve(world.Listen(port)))
}
