// Plant names for the benchmarks that search (bench/search-bulk.ts, bench/size.ts): a vocabulary of a
// few hundred plant words — genera, epithets, cultivars (some accented), places in the house —,
// 2–6 words a name, drawn with a fixed PRNG so that every run and both engines get the same names.
import { searchWords } from '../src/search-text.js';

export const QUARTER_TAG = 'indoor';

// ---------------------------------------------------------------------------------------------
// Names: a vocabulary of a few hundred plant words, drawn with a skew (a few genera are common).

export const GENERA =
  `Monstera Philodendron Ficus Calathea Pilea Aloe Echeveria Sansevieria Dracaena Anthurium
  Alocasia Begonia Peperomia Hoya Epipremnum Syngonium Maranta Ctenanthe Stromanthe Aglaonema
  Dieffenbachia Spathiphyllum Zamioculcas Chlorophytum Tradescantia Fittonia Haworthia Crassula
  Kalanchoe Sedum Senecio Opuntia Mammillaria Echinocactus Schlumbergera Phalaenopsis Dendrobium
  Cattleya Oncidium Vanda Nepenthes Sarracenia Dionaea Drosera Strelitzia Musa Howea Chamaedorea
  Dypsis Livistona Rhapis Cycas Asplenium Nephrolepis Adiantum Platycerium Davallia Pteris Rosa
  Lavandula Rosmarinus Salvia Thymus Mentha Ocimum Origanum Petroselinum Allium Solanum Capsicum
  Cucurbita Fragaria Citrus Olea Laurus Hydrangea Camellia Gardenia Jasminum Hibiscus Bougainvillea
  Pelargonium Fuchsia Petunia Geranium Dahlia Tulipa Narcissus Hyacinthus Crocus Iris Lilium
  Paeonia Clematis Wisteria Magnolia Acer Quercus Betula Fagus Buxus Taxus Juniperus Pinus
  Helianthus Chrysanthemum Gerbera Cyclamen Primula Viola Campanula Digitalis Delphinium Lupinus
  Papaver Echinacea Rudbeckia Agave Yucca Beaucarnea Ceropegia Rhipsalis Oxalis Cissus Hedera`.split(/\s+/);
export const EPITHETS =
  `deliciosa adansonii lyrata elastica benjamina orbifolia peperomioides vera trifasciata
  marginata fragrans andraeanum amazonica zebrina polyphylla obtusifolia caperata carnosa kerrii
  aureum podophyllum leuconeura wallisii zamiifolia comosum albiflora verschaffeltii attenuata ovata
  blossfeldiana morganianum rowleyanus microdasys truncata aphrodite nobilis ventricosa purpurea
  muscipula capensis reginae nicolai forsteriana elegans lutescens excelsa revoluta nidus exaltata
  raddianum bifurcatum officinalis angustifolia vulgaris spicata basilicum sativum lycopersicum
  annuum vesca limon europaea macrophylla japonica jasminoides sinensis glabra zonale magellanica
  hybrida pinnata gesneriana pseudonarcissus orientalis vernus germanica regale lactiflora montana
  grandiflora palmatum robur pendula sylvatica sempervirens baccata communis sylvestris annuus
  morifolium jamesonii persicum tricolor medium elatum polyphyllus somniferum hirta americana
  elephantipes woodii baccifera triangularis rhombifolia helix rubra alba variegata minima major
  compacta nana scandens gigantea`.split(/\s+/);
export const CULTIVARS = [
  'Thai Constellation',
  'Pink Princess',
  'Albo',
  'Marble Queen',
  'Golden',
  'Silver',
  'Variegata',
  'Aurea',
  'Moonlight',
  'Birkin',
  'Brasil',
  'Lemon Lime',
  'Neon',
  'Snow Queen',
  'Emerald',
  'Velvet',
  'Black Prince',
  'Café au Lait',
  'Crème Brûlée',
  'Belle Époque',
  'Rosé',
  'Château',
  'Éclair',
  'Sérénade',
  'Élégance',
  'Frühlingsgold',
  'Schöne Müllerin',
  'Señorita',
  'Fête',
  'Rêve',
  'Île de France',
  'Pâquerette',
  'Blütenzauber',
  'Noël',
  'Désirée',
  'Glücksklee',
  'Crêpe',
  'Ombré',
  'Mañana',
  'Red Star',
];
export const PLACES = `kitchen balcony bedroom office window shelf porch greenhouse cutting seedling repotted
  large small hanging north south east west bathroom hallway terrace garden gift grandma`.split(/\s+/);
export const TAGS = ['outdoor', 'herb', 'succulent', 'orchid', 'fern', 'palm', 'gift'];

/** A small fixed PRNG, so every run (and both engines) gets the same names. */
export function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

/** Index into `n` things, the first ones more likely (weight 1 / (rank + 1)^0.9). */
function skewed(n: number): (r: number) => number {
  const w = Array.from({ length: n }, (_, k) => 1 / (k + 1) ** 0.9);
  const total = w.reduce((a, b) => a + b, 0);
  const cum: number[] = [];
  let acc = 0;
  for (const x of w) {
    acc += x / total;
    cum.push(acc);
  }
  return (r) => {
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cum[mid]! < r) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
}
const pickGenus = skewed(GENERA.length);

/**
 * A plant's name and tag: a genus, one of its 1–3 epithets, then maybe a cultivar, a place, a
 * number; a quarter of the plants tagged QUARTER_TAG, a third with another tag.
 */
export function makePlant(rand: () => number): { name: string; tag: string | null } {
  const g = pickGenus(rand());
  const epithet = EPITHETS[(g * 7 + Math.floor(rand() * (1 + (g % 3))) * 31) % EPITHETS.length]!;
  const parts = [GENERA[g]!, epithet];
  if (rand() < 0.35) parts.push(`'${CULTIVARS[Math.floor(rand() * CULTIVARS.length)]}'`);
  if (rand() < 0.3) parts.push(`(${PLACES[Math.floor(rand() * PLACES.length)]})`);
  if (rand() < 0.1) parts.push(`#${1 + Math.floor(rand() * 20)}`);
  const t = rand();
  const tag = t < 0.25 ? QUARTER_TAG : t < 0.6 ? TAGS[Math.floor(t * 100) % TAGS.length]! : null;
  return { name: parts.join(' '), tag };
}

/** Whether a name matches a query as contract 2 says (every term a prefix of a word). */
export function matches(name: string, terms: string[]): boolean {
  const words = searchWords(name);
  return terms.every((t) => words.some((w) => w.startsWith(t)));
}
