// Package world is the net/http peer's database work on database/sql +
// lib/pq (TechEmpower's go-std), and what both Go peers share: the World row,
// the /json message and the queries parameter's clamping.
package world

import (
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"html/template"
	"io"
	"math/rand"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"

	_ "github.com/lib/pq"
)

// Row is one World row.
type Row struct {
	ID           int `json:"id"`
	RandomNumber int `json:"randomNumber"`
}

// Message is the /json body.
type Message struct {
	Message string `json:"message"`
}

// Fortune is one Fortune row.
type Fortune struct {
	ID      int
	Message string
}

// DB holds the pool and the prepared statements.
type DB struct {
	db                        *sql.DB
	world, fortunes, updateSt *sql.Stmt
}

// Options parses the peers' command line: -port, -db and -pool.
func Options(defaultPort int) (port int, conninfo string, pool int) {
	flag.IntVar(&port, "port", defaultPort, "port")
	flag.StringVar(&conninfo, "db", "", "libpq connection string")
	flag.IntVar(&pool, "pool", 16, "database connections at most")
	flag.Parse()
	return
}

// Listen listens on 127.0.0.1:port and prints "listening on HOST:PORT".
func Listen(port int) net.Listener {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	Check(err)
	fmt.Printf("listening on %s\n", ln.Addr())
	return ln
}

// Check exits with err's message if err is not nil.
func Check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// Start parses the options, opens the database (database/sql + lib/pq) and
// listens; it exits on failure.
func Start(defaultPort int) (*DB, net.Listener) {
	port, conninfo, pool := Options(defaultPort)
	db, err := Open(conninfo, pool)
	Check(err)
	return db, Listen(port)
}

// Open connects a pool of at most `pool` connections.
func Open(conninfo string, pool int) (*DB, error) {
	db, err := sql.Open("postgres", conninfo)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(pool)
	db.SetMaxIdleConns(pool)
	d := &DB{db: db}
	if d.world, err = db.Prepare("SELECT id, randomNumber FROM World WHERE id = $1"); err != nil {
		return nil, err
	}
	if d.fortunes, err = db.Prepare("SELECT id, message FROM Fortune"); err != nil {
		return nil, err
	}
	d.updateSt, err = db.Prepare("UPDATE World SET randomNumber = v.r FROM " +
		"(SELECT unnest($1::int[]) AS id, unnest($2::int[]) AS r ORDER BY 1) AS v WHERE World.id = v.id")
	return d, err
}

// Count is the queries parameter clamped as the requirements say.
func Count(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		if err != nil && len(s) > 0 && s[0] != '-' && strings.Trim(s, "0123456789") == "" {
			return 500 // a number too large for an int
		}
		return 1
	}
	if n > 500 {
		return 500
	}
	return n
}

func randomID() int { return rand.Intn(10000) + 1 }

// Rows reads n random rows, one query each.
func (d *DB) Rows(n int) ([]Row, error) {
	rows := make([]Row, n)
	for i := range rows {
		if err := d.world.QueryRow(randomID()).Scan(&rows[i].ID, &rows[i].RandomNumber); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// Update reads n random rows, gives each a new number, writes them back.
func (d *DB) Update(n int) ([]Row, error) {
	rows, err := d.Rows(n)
	if err != nil {
		return nil, err
	}
	chosen := map[int]int{}
	var ids, numbers []string
	for i := range rows {
		if v, ok := chosen[rows[i].ID]; ok {
			rows[i].RandomNumber = v
			continue
		}
		rows[i].RandomNumber = randomID()
		chosen[rows[i].ID] = rows[i].RandomNumber
		ids = append(ids, strconv.Itoa(rows[i].ID))
		numbers = append(numbers, strconv.Itoa(rows[i].RandomNumber))
	}
	_, err = d.updateSt.Exec("{"+strings.Join(ids, ",")+"}", "{"+strings.Join(numbers, ",")+"}")
	return rows, err
}

var page = template.Must(template.New("fortunes").Parse(
	`<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>` +
		`<tr><th>id</th><th>message</th></tr>{{range .}}<tr><td>{{.ID}}</td><td>{{.Message}}</td></tr>` +
		`{{end}}</table></body></html>`))

// Fortunes writes the fortunes page.
func (d *DB) Fortunes(w io.Writer) error {
	r, err := d.fortunes.Query()
	if err != nil {
		return err
	}
	defer r.Close()
	list := make([]Fortune, 0, 16)
	for r.Next() {
		var f Fortune
		if err := r.Scan(&f.ID, &f.Message); err != nil {
			return err
		}
		list = append(list, f)
	}
	list = append(list, Fortune{0, "Additional fortune added at request time."})
	sort.Slice(list, func(i, j int) bool { return list[i].Message < list[j].Message })
	return page.Execute(w, list)
}

// JSON marshals v (the test types' bodies).
func JSON(v interface{}) []byte {
	b, _ := json.Marshal(v)
	return b
}
